"""The CRD schemas the validator judges manifests by: pinned upstream files, checked by digest, cached per user.

Like kubeconform's schema cache: `workshop crds fetch` downloads each pinned release's CRD files from its
upstream tag, checks every file against the sha256 recorded below and refuses a mismatch; `workshop crds
import DIR` fills the cache from a folder (air-gapped sites, CI), with the same digests checked. The cache is
`$XDG_CACHE_HOME/workshop/crds` (default `~/.cache/workshop/crds`); `WORKSHOP_CRDS_DIR` points validation at a
folder of the same layout instead. Nothing else is ever read.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, report

BASE_URL = "https://raw.githubusercontent.com"  # + /<repo>/<tag>/<path>; WORKSHOP_CRDS_BASE_URL overrides
FIX = "run `workshop crds fetch` (needs the network) or `workshop crds import DIR` (a folder of the same files)"


@dataclass(frozen=True)
class Release:
    family: str   # "karpenter" | "trainer": what validate.FAMILIES calls it
    version: str
    repo: str     # owner/name on GitHub
    files: tuple  # (path in the cache folder, path in the repository at the tag, sha256)

    @property
    def folder(self) -> str:
        return {"karpenter": "karpenter-aws-v{}", "trainer": "kubeflow-trainer-v{}"}[self.family].format(self.version)

    @property
    def tag(self) -> str:
        return f"v{self.version}"


def _karpenter(version: str, nodepools: str, nodeclaims: str, ec2nodeclasses: str) -> Release:
    return Release("karpenter", version, "aws/karpenter-provider-aws", tuple(
        (name, f"pkg/apis/crds/{name}", digest) for name, digest in (
            ("karpenter.sh_nodepools.yaml", nodepools), ("karpenter.sh_nodeclaims.yaml", nodeclaims),
            ("karpenter.k8s.aws_ec2nodeclasses.yaml", ec2nodeclasses))))


def _trainer(version: str, trainjobs: str, runtimes: str, cluster_runtimes: str, extra=()) -> Release:
    crds = tuple((f"trainer.kubeflow.org_{kind}.yaml", f"manifests/base/crds/trainer.kubeflow.org_{kind}.yaml", d)
                 for kind, d in (("trainjobs", trainjobs), ("trainingruntimes", runtimes),
                                 ("clustertrainingruntimes", cluster_runtimes)))
    return Release("trainer", version, "kubeflow/trainer", crds + tuple(extra))


# Digests of the files at their release tags (karpenter-provider-aws v1.8.8 = 5b5bf22e, v1.14.1 = bde00654;
# kubeflow/trainer v2.1.0 = 73c9bece, v2.3.0 = 658725bd). A release added here needs its files' digests.
RELEASES: tuple[Release, ...] = (
    _karpenter("1.8.8", "afb06cd334df6cd7a063eabd173a7fba249b1edf5b62aae5c507fd8d91ad562b",
               "8ae55a4c28aa50e4d5d5d58842f265e16131aaeb26d982ae45597fd2f392f4f8",
               "92854a4070992a4775bcf250132b9cb2c7b266155ff693b7fa3f7ba64dbe0a30"),
    _karpenter("1.14.1", "3bb64a20c80776b77aa19a699ebdaf34480a7b2e7ec4ef890b43225b3517f878",
               "96037dc241031fe0f7a09ddf78183d885ce6a1dfe115f7b3fbf8a12c564be694",
               "62dec59f01c0972d4503ca3ed25f243ba9c2f561be0d964ce7a14c8df406132f"),
    _trainer("2.1.0", "65ea8f95f298103275e00b690bda5e090355f7eb5d6e4d15236b557f088b8078",
             "bcf07e6094259d389a00d84013e7723b975570373ee00f07dc5faec7b002f155",
             "be1a629914db7bef3b4f864be82a0bfcb7ab5fb8e2fd58542de024b9f5f559f0",
             # Kubeflow's own runtimes of that release: a real-world positive corpus for the validator
             extra=(("runtimes/torch_distributed.yaml", "manifests/base/runtimes/torch_distributed.yaml",
                     "1a7676cef35c79ac281bdc9cec20fbc8604f0ff1b394c1e7619623f1b243410a"),
                    ("runtimes/deepspeed_distributed.yaml", "manifests/base/runtimes/deepspeed_distributed.yaml",
                     "15dc4d6606a2d4fb9b722390a742b92e7e73e6ebb51e36f6a2002b2dc5791aeb"))),
    _trainer("2.3.0", "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
             "69b8dbdf60a18e28cddcc2b8dfc4ce72a943e14b531b9389d593118faee4919f",
             "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9"),
)


class CRDsMissing(WorkshopError):
    """The schemas a validation needs are not on this machine (and could not be fetched)."""


def release(family: str, version: str) -> Release:
    known = [r for r in RELEASES if r.family == family]
    check_choice(f"{family} version", version, [r.version for r in known])
    return next(r for r in known if r.version == version)


def versions(family: str) -> list[str]:
    return [r.version for r in RELEASES if r.family == family]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "workshop" / "crds"


def root() -> Path:
    """Where validation reads CRDs: `$WORKSHOP_CRDS_DIR` if set, else the user cache."""
    env = os.environ.get("WORKSHOP_CRDS_DIR")
    return Path(env).expanduser() if env else cache_dir()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def missing(rel: Release, folder: Path | None = None) -> list[str]:
    folder = (folder or root()) / rel.folder
    return [name for name, _, _ in rel.files if not (folder / name).is_file()]


def folder(family: str, version: str, *, fetch_if_missing: bool = True) -> Path:
    """The folder holding one release's CRDs, fetching it into the cache on first use when that works."""
    rel = release(family, version)
    if not missing(rel):
        return root() / rel.folder
    if fetch_if_missing and "WORKSHOP_CRDS_DIR" not in os.environ:
        with contextlib.suppress(CRDsMissing):
            fetch([rel], quiet=True)
            return root() / rel.folder
    where = f"WORKSHOP_CRDS_DIR={root()}" if "WORKSHOP_CRDS_DIR" in os.environ else f"the cache {root()}"
    raise CRDsMissing(f"no CRD schemas for {family} {version} in {where} (and none could be downloaded); {FIX}")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: a reader never sees half a schema


def fetch(releases=RELEASES, *, base_url: str | None = None, timeout: float = 30, quiet: bool = False) -> list[str]:
    """Download each release's files into the cache, verifying every digest first. Files already cached
    with the right digest are not downloaded again. Returns the cache paths written."""
    base = (base_url or os.environ.get("WORKSHOP_CRDS_BASE_URL") or BASE_URL).rstrip("/")
    written = []
    for rel in releases:
        for name, upstream, digest in rel.files:
            dest = cache_dir() / rel.folder / name
            if dest.is_file() and _sha256(dest.read_bytes()) == digest:
                continue
            url = f"{base}/{rel.repo}/{rel.tag}/{upstream}"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    data = resp.read()
            except (urllib.error.URLError, OSError) as e:
                raise CRDsMissing(f"could not download {url}: {getattr(e, 'reason', e)}; {FIX}") from None
            if _sha256(data) != digest:
                raise CRDsMissing(f"{url} does not match its pinned sha256 {digest[:12]}… (got "
                                  f"{_sha256(data)[:12]}…): refused, nothing written")
            _write(dest, data)
            written.append(str(dest))
            if not quiet:
                print(f"fetched {rel.folder}/{name}")
    return written


def import_dir(src: str | Path) -> list[str]:
    """Copy the pinned files found in `src` (same layout: <release folder>/<file>) into the cache, each
    checked against its digest. A file that differs is refused; releases absent from `src` are skipped."""
    src = Path(src).expanduser()
    if not src.is_dir():
        raise WorkshopError(f"{src} is not a folder; expected one holding e.g. karpenter-aws-v1.8.8/")
    written, refused = [], []
    for rel in RELEASES:
        for name, _, digest in rel.files:
            path = src / rel.folder / name
            if not path.is_file():
                continue
            data = path.read_bytes()
            if _sha256(data) != digest:
                refused.append(f"{rel.folder}/{name}")
                continue
            dest = cache_dir() / rel.folder / name
            if dest.resolve() != path.resolve():
                _write(dest, data)
            written.append(str(dest))
    if refused:
        raise WorkshopError(f"refused {len(refused)} file(s) whose sha256 differs from the pinned release: "
                            f"{', '.join(refused)}; {len(written)} imported")
    if not written:
        raise WorkshopError(f"no pinned CRD file found under {src}; expected e.g. "
                            f"{RELEASES[0].folder}/{RELEASES[0].files[0][0]}")
    return written


def status() -> list[tuple[str, str, list[str]]]:
    return [(rel.family, rel.version, missing(rel)) for rel in RELEASES]


@contextlib.contextmanager
def or_skip(what: str = "validation"):
    """For notebook cells: run the block, or say in one line why it was skipped when the schemas are absent."""
    try:
        yield
    except CRDsMissing as e:
        print(f"{what} skipped: {e}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="workshop crds", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download the pinned releases' CRDs into the cache (digests checked)")
    imp = sub.add_parser("import", help="fill the cache from a folder of the same layout (digests checked)")
    imp.add_argument("dir")
    sub.add_parser("status", help="which releases are in the cache (or WORKSHOP_CRDS_DIR)")
    a = p.parse_args(argv)
    try:
        if a.cmd == "fetch":
            written = fetch()
            print(f"{len(written)} file(s) downloaded; cache: {cache_dir()}")
        elif a.cmd == "import":
            print(f"{len(import_dir(a.dir))} file(s) imported into {cache_dir()}")
        else:
            print(f"CRD schemas read from {root()}")
            for family, version, gone in status():
                print(f"  {family} {version}: " + ("complete" if not gone else f"missing {', '.join(gone)}"))
            if any(gone for *_, gone in status()):
                print(f"  to complete: {FIX}")
    except WorkshopError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
