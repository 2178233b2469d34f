"""The support matrices versions are judged by, each with where it was read.

Karpenter publishes the oldest Karpenter release that supports each Kubernetes minor ("Compatibility Matrix",
karpenter.sh/<version>/upgrading/compatibility, generated from the provider repository's
hack/docs/compatibilitymatrix_gen/compatibility.yaml): Kubernetes 1.29 needs Karpenter >= 0.34, 1.30 >= 0.37,
1.31 >= 1.0.5, 1.32 >= 1.2, 1.33 >= 1.5 (karpenter.sh/v1.6/upgrading/compatibility); 1.34 >= 1.6 and
1.35 >= 1.9 (endoflife.date/karpenter, which lists 1.29-1.34 for Karpenter 1.6-1.8 and 1.29-1.35 for
1.9-1.11). A minor newer than the table is not judged: it says so and names the page.

Kubeflow Trainer v2 needs Kubernetes >= 1.31
(kubeflow.org/docs/components/trainer/operator-guides/installation, "Prerequisites"). The releases the
workbook renders TrainJobs for are `trainjob.TRAINER_VERSIONS`."""

from __future__ import annotations

import re

KARPENTER_MATRIX_PAGE = "https://karpenter.sh/docs/upgrading/compatibility/"
# Kubernetes minor -> the oldest Karpenter release that supports it (read 2026-11-28; see the docstring)
KARPENTER_MIN_FOR = {
    (1, 29): (0, 34, 0),
    (1, 30): (0, 37, 0),
    (1, 31): (1, 0, 5),
    (1, 32): (1, 2, 0),
    (1, 33): (1, 5, 0),
    (1, 34): (1, 6, 0),
    (1, 35): (1, 9, 0),
}
TRAINER_MIN_KUBERNETES = (1, 31)
TRAINER_INSTALL_PAGE = "https://www.kubeflow.org/docs/components/trainer/operator-guides/installation/"

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'v1.33.0-eks-1234', '1.8.8', 'v2.3.0' -> (major, minor, patch); None when there is no version in it."""
    m = _VERSION.search(text or "")
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def karpenter_supports(karpenter: tuple[int, int, int], kubernetes: tuple[int, int]) -> bool | None:
    """True/False by the published matrix; None when the Kubernetes minor is outside it (newer or older)."""
    needed = KARPENTER_MIN_FOR.get(kubernetes)
    return None if needed is None else karpenter >= needed


def newest_known_minor() -> tuple[int, int]:
    return max(KARPENTER_MIN_FOR)
