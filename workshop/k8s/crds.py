"""The CRD schemas the validator judges manifests by: pinned upstream files that ship with the package.

A fresh clone validates offline: the pinned releases' CRD files live in `workshop/k8s/schemas/` (the upstream
files byte for byte, Apache-2.0; `schemas/SOURCES.md` names each one's repository, tag, path and sha256), and
every read checks the file against the digest recorded below. Other releases are the learner's to add, like
kubeconform's schema cache: `workshop crds fetch --karpenter 1.9.0` downloads that tag's files into
`$XDG_CACHE_HOME/workshop/crds` (default `~/.cache/workshop/crds`) and records their digests there (trust on
first download, printed so they can be compared with upstream); `workshop crds import DIR` does the same from
a folder. `WORKSHOP_CRDS_DIR` points validation at one folder of the same layout instead of all of this.

Where a release is read from, in order: `$WORKSHOP_CRDS_DIR` (when set, only there), the package, the cache,
then a download into the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError, check_choice
from workshop.lang import N_

BASE_URL = "https://raw.githubusercontent.com"  # + /<repo>/<tag>/<path>; WORKSHOP_CRDS_BASE_URL overrides
SHIPPED = Path(__file__).resolve().parent / "schemas"
FAMILIES = ("karpenter", "trainer")
FOLDER = {"karpenter": "karpenter-aws-v{}", "trainer": "kubeflow-trainer-v{}"}
REPO = {"karpenter": "aws/karpenter-provider-aws", "trainer": "kubeflow/trainer"}
NAME = {"karpenter": "Karpenter", "trainer": "Kubeflow Trainer"}
DIGESTS_FILE = "SHA256SUMS"  # in a cached release's folder: the digests recorded when it was downloaded
# A release's files: (path in the release folder, path in the repository at the tag, sha256).
Files = tuple[tuple[str, str, str], ...]
ADD = (
    "`python -m workshop crds fetch --{family} VERSION` (needs the network) "
    "or `python -m workshop crds import DIR`"
)


@dataclass(frozen=True)
class Release:
    family: str  # "karpenter" | "trainer"
    version: str
    files: Files  # (path in the release folder, path in the repository at the tag, sha256)
    note: str = ""  # what the release supports (Kubernetes versions, API form), with where that was read
    pinned: bool = True  # shipped with the package; False: added by the learner into the cache

    @property
    def folder(self) -> str:
        return FOLDER[self.family].format(self.version)

    @property
    def repo(self) -> str:
        return REPO[self.family]

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def label(self) -> str:
        return f"{NAME[self.family]} {self.version}"


def _karpenter_files(nodepools: str = "", nodeclaims: str = "", ec2nodeclasses: str = "") -> Files:
    return tuple(
        (name, f"pkg/apis/crds/{name}", digest)
        for name, digest in (
            ("karpenter.sh_nodepools.yaml", nodepools),
            ("karpenter.sh_nodeclaims.yaml", nodeclaims),
            ("karpenter.k8s.aws_ec2nodeclasses.yaml", ec2nodeclasses),
        )
    )


def _trainer_files(
    trainjobs: str = "", runtimes: str = "", cluster_runtimes: str = "", extra: Files = ()
) -> Files:
    return tuple(
        (f"trainer.kubeflow.org_{kind}.yaml", f"manifests/base/crds/trainer.kubeflow.org_{kind}.yaml", d)
        for kind, d in (
            ("trainjobs", trainjobs),
            ("trainingruntimes", runtimes),
            ("clustertrainingruntimes", cluster_runtimes),
        )
    ) + tuple(extra)


# an added release: same paths, digests at download
LAYOUT: dict[str, Callable[[], Files]] = {"karpenter": _karpenter_files, "trainer": _trainer_files}

# Digests of the files at their release tags (karpenter-provider-aws v1.8.8 = 5b5bf22e, v1.14.1 = bde00654;
# kubeflow/trainer v2.1.0 = 73c9bece, v2.3.0 = 658725bd). A release added here ships its files in schemas/.
# Kubernetes support: Karpenter's compatibility matrix (karpenter.sh/<version>/upgrading/compatibility;
# endoflife.date/karpenter lists 1.29-1.34 for 1.8 and 1.29-1.35 for 1.9-1.11).
RELEASES: tuple[Release, ...] = (
    Release(
        "karpenter",
        "1.8.8",
        _karpenter_files(
            "afb06cd334df6cd7a063eabd173a7fba249b1edf5b62aae5c507fd8d91ad562b",
            "8ae55a4c28aa50e4d5d5d58842f265e16131aaeb26d982ae45597fd2f392f4f8",
            "92854a4070992a4775bcf250132b9cb2c7b266155ff693b7fa3f7ba64dbe0a30",
        ),
        note=N_("Kubernetes 1.29-1.34 (Karpenter's compatibility matrix; nothing newer than 1.34)"),
    ),
    Release(
        "karpenter",
        "1.14.1",
        _karpenter_files(
            "3bb64a20c80776b77aa19a699ebdaf34480a7b2e7ec4ef890b43225b3517f878",
            "96037dc241031fe0f7a09ddf78183d885ce6a1dfe115f7b3fbf8a12c564be694",
            "62dec59f01c0972d4503ca3ed25f243ba9c2f561be0d964ce7a14c8df406132f",
        ),
        note=N_(
            "Kubernetes 1.29 and later, 1.35 included (every release since 1.9 supports 1.35; check "
            "karpenter.sh/v1.14/upgrading/compatibility for newer ones)"
        ),
    ),
    Release(
        "trainer",
        "2.1.0",
        _trainer_files(
            "65ea8f95f298103275e00b690bda5e090355f7eb5d6e4d15236b557f088b8078",
            "bcf07e6094259d389a00d84013e7723b975570373ee00f07dc5faec7b002f155",
            "be1a629914db7bef3b4f864be82a0bfcb7ab5fb8e2fd58542de024b9f5f559f0",
            # Kubeflow's own runtimes of that release: a real-world positive corpus for the validator
            extra=(
                (
                    "runtimes/torch_distributed.yaml",
                    "manifests/base/runtimes/torch_distributed.yaml",
                    "1a7676cef35c79ac281bdc9cec20fbc8604f0ff1b394c1e7619623f1b243410a",
                ),
                (
                    "runtimes/deepspeed_distributed.yaml",
                    "manifests/base/runtimes/deepspeed_distributed.yaml",
                    "15dc4d6606a2d4fb9b722390a742b92e7e73e6ebb51e36f6a2002b2dc5791aeb",
                ),
            ),
        ),
        note=N_("the TrainJob API form with podTemplateOverrides (the original workshop's release)"),
    ),
    Release(
        "trainer",
        "2.3.0",
        _trainer_files(
            "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
            "69b8dbdf60a18e28cddcc2b8dfc4ce72a943e14b531b9389d593118faee4919f",
            "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9",
        ),
        note=N_("the TrainJob API form with runtimePatches (2.2 and later)"),
    ),
)


class CRDsMissing(WorkshopError):
    """The schemas a validation needs are not on this machine (and could not be fetched)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "workshop" / "crds"


def override_dir() -> Path | None:
    """$WORKSHOP_CRDS_DIR, the one folder validation reads when it is set; None otherwise."""
    env = os.environ.get("WORKSHOP_CRDS_DIR")
    return Path(env).expanduser() if env else None


def _version_key(version: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.-]", version))


def _added(family: str) -> list[Release]:
    """Releases the learner added to the cache (`crds fetch`/`import`), with the digests recorded then."""
    pinned = {r.version for r in RELEASES if r.family == family}
    found = []
    prefix = FOLDER[family].format("")
    base = cache_dir()
    for folder in sorted(base.glob(prefix + "*")) if base.is_dir() else []:
        version = folder.name[len(prefix) :]
        sums = folder / DIGESTS_FILE
        if version in pinned or not sums.is_file():
            continue
        digests = dict(line.split("  ", 1)[::-1] for line in sums.read_text().splitlines() if "  " in line)
        files = tuple((name, upstream, digests.get(name, "")) for name, upstream, _ in LAYOUT[family]())
        found.append(Release(family, version, files, note=N_("added by you"), pinned=False))
    return found


def releases(family: str | None = None) -> list[Release]:
    """The known releases (a list of Release): the pinned ones, then the ones added to the cache, oldest
    first within each family."""
    fams = FAMILIES if family is None else (family,)
    out = []
    for fam in fams:
        out += sorted(
            [r for r in RELEASES if r.family == fam] + _added(fam), key=lambda r: _version_key(r.version)
        )
    return out


def versions(family: str) -> list[str]:
    check_choice("CRD family", family, FAMILIES)
    return [r.version for r in releases(family)]


def pinned_versions(family: str) -> list[str]:
    return [r.version for r in RELEASES if r.family == family]


def release(family: str, version: str) -> Release:
    """One known release; an unknown one is refused naming the known ones and how to add another."""
    check_choice("CRD family", family, FAMILIES)
    known = releases(family)
    if version not in [r.version for r in known]:
        raise WorkshopError(
            f"{NAME[family]} release {version!r} is unknown here; known: "
            f"{', '.join(r.version for r in known)} (to add one: {ADD.format(family=family)})"
        )
    return next(r for r in known if r.version == version)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def missing(rel: Release, folder: Path | None = None) -> list[str]:
    """Files of `rel` absent from `folder` (a folder holding release folders; default: the cache)."""
    where = (folder or cache_dir()) / rel.folder
    return [name for name, _, _ in rel.files if not (where / name).is_file()]


_CHECKED: dict[tuple, str] = {}  # (path, size, mtime) -> sha256: each file is hashed once per process


def _file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _CHECKED:
        _CHECKED[key] = _sha256(path.read_bytes())
    return _CHECKED[key]


def _verified(rel: Release, where: Path) -> Path | None:
    """`where` if it holds every file of `rel` with the recorded digest; None if a file is absent. A file that
    is present but altered is an error, never silently replaced by another copy."""
    if missing(rel, where.parent):
        return None
    for name, _, digest in rel.files:
        got = _file_sha256(where / name)
        if digest and got != digest:
            raise CRDsMissing(
                f"{where / name} does not match the sha256 recorded for {rel.label} "
                f"({digest[:12]}…, got {got[:12]}…): it was altered; restore it or delete it"
            )
    return where


def source(rel: Release) -> str:
    """Where a release is read from: 'WORKSHOP_CRDS_DIR', 'package', 'cache' or 'missing'."""
    override = override_dir()
    if override is not None:
        return "WORKSHOP_CRDS_DIR" if not missing(rel, override) else "missing"
    if rel.pinned and not missing(rel, SHIPPED):
        return "package"
    return "cache" if not missing(rel) else "missing"


def folder(family: str, version: str, *, fetch_if_missing: bool = True) -> Path:
    """The folder holding one release's CRD files, each checked against its digest (see the module's
    order)."""
    rel = release(family, version)
    override = override_dir()
    if override is not None:
        found = _verified(rel, override / rel.folder)
        if found:
            return found
        raise CRDsMissing(
            f"no CRD schemas for {rel.label} in WORKSHOP_CRDS_DIR={override}; unset it to use "
            f"the ones that ship with the workbook"
        )
    for base in ([SHIPPED] if rel.pinned else []) + [cache_dir()]:
        found = _verified(rel, base / rel.folder)
        if found:
            return found
    if fetch_if_missing:
        with contextlib.suppress(CRDsMissing):
            fetch([rel])
            return cache_dir() / rel.folder
    raise CRDsMissing(
        f"no CRD schemas for {rel.label} on this machine (and none could be downloaded); "
        f"{ADD.format(family=family)}"
    )


def _not_a_crd(name: str, data: bytes) -> str | None:
    """Why a file of an added release (no pinned digest to check) is not a CustomResourceDefinition, or None.
    Runtimes (runtimes/*.yaml) are manifests of other kinds and only need to be YAML."""
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(data.decode()) if d is not None]
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        return f"{name} is not YAML text ({type(e).__name__})"
    if not name.startswith("runtimes/") and not any(
        isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs
    ):
        return f"{name} holds no CustomResourceDefinition"
    return None


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: a reader never sees half a schema


def _record_digests(rel: Release, digests: dict[str, str]) -> None:
    lines = "".join(f"{digests[name]}  {name}\n" for name, _, _ in rel.files)
    _write(cache_dir() / rel.folder / DIGESTS_FILE, lines.encode())


def new_release(family: str, version: str) -> Release:
    """A release not pinned here, laid out like the pinned ones of its family; digests recorded on
    download."""
    check_choice("CRD family", family, FAMILIES)
    if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", version):
        raise WorkshopError(
            f"{NAME[family]} version {version!r} is not a release number such as "
            f"{pinned_versions(family)[-1]}"
        )
    pinned = [r for r in RELEASES if r.family == family and r.version == version]
    return (
        pinned[0]
        if pinned
        else Release(family, version, LAYOUT[family](), note=N_("added by you"), pinned=False)
    )


def fetch(
    rels, *, base_url: str | None = None, timeout: float = 30, echo: Callable[[str], None] | None = None
) -> list[str]:
    """Download each release's files into the cache; the paths written. A pinned release's files must match
    their digests (a mismatch is refused, nothing written); an added release's digests are recorded beside
    its files. `echo` hears each file fetched and its sha256; `timeout` is in seconds."""
    base = (base_url or os.environ.get("WORKSHOP_CRDS_BASE_URL") or BASE_URL).rstrip("/")
    written = []
    for rel in rels:
        got: dict[str, bytes] = {}
        for name, upstream, digest in rel.files:
            dest = cache_dir() / rel.folder / name
            if digest and dest.is_file() and _sha256(dest.read_bytes()) == digest:
                continue
            url = f"{base}/{rel.repo}/{rel.tag}/{upstream}"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    data = resp.read()
            except urllib.error.HTTPError as e:
                raise CRDsMissing(
                    f"could not download {url}: HTTP {e.code} (is {rel.tag} a {NAME[rel.family]} release?)"
                ) from None
            except (urllib.error.URLError, OSError) as e:
                raise CRDsMissing(f"could not download {url}: {getattr(e, 'reason', e)}") from None
            if digest and _sha256(data) != digest:
                raise CRDsMissing(
                    f"{url} does not match its pinned sha256 {digest[:12]}… (got "
                    f"{_sha256(data)[:12]}…): refused, nothing written"
                )
            if not digest and (why := _not_a_crd(name, data)):
                raise CRDsMissing(f"{url}: {why}; refused, nothing written")
            got[name] = data
        for name, data in got.items():  # all downloaded and checked before the first write
            _write(cache_dir() / rel.folder / name, data)
            written.append(str(cache_dir() / rel.folder / name))
            if echo is not None:
                echo(f"fetched {rel.folder}/{name}  sha256 {_sha256(data)}")
        if not rel.pinned and got:
            _record_digests(rel, {name: _sha256(data) for name, data in got.items()})
    return written


def import_dir(src: str | Path) -> list[str]:
    """Copy release folders found in `src` (<release folder>/<file>) into the cache. A pinned release's files
    are checked against their digests (one that differs is refused); another release's digests are
    recorded."""
    src = Path(src).expanduser()
    if not src.is_dir():
        raise WorkshopError(f"{src} is not a folder; expected one holding e.g. {RELEASES[0].folder}/")
    written, refused = [], []
    for family in FAMILIES:
        prefix = FOLDER[family].format("")
        for sub in sorted(src.glob(prefix + "*")):
            rel = new_release(family, sub.name[len(prefix) :])
            if missing(rel, src):
                continue
            datas = {name: (sub / name).read_bytes() for name, _, _ in rel.files}
            bad = [
                f"{rel.folder}/{n}"
                for n, _, d in rel.files
                if (d and _sha256(datas[n]) != d) or (not d and _not_a_crd(n, datas[n]))
            ]
            if bad:
                refused += bad
                continue
            for name, data in datas.items():
                dest = cache_dir() / rel.folder / name
                if dest.resolve() != (sub / name).resolve():
                    _write(dest, data)
                written.append(str(dest))
            if not rel.pinned:
                _record_digests(rel, {n: _sha256(d) for n, d in datas.items()})
    if refused:
        raise WorkshopError(
            f"refused {len(refused)} file(s) (a pinned release's sha256 differs, or an added "
            "release's file is not a CRD): "
            f"{', '.join(refused)}; {len(written)} imported"
        )
    if not written:
        raise WorkshopError(
            f"no complete release folder found under {src}; expected e.g. "
            f"{RELEASES[0].folder}/{RELEASES[0].files[0][0]}"
        )
    return written


def status() -> list[tuple[Release, str]]:
    return [(rel, source(rel)) for rel in releases()]


SOURCES_HEADER = """\
# The CRD files that ship with the workbook

Unmodified upstream files, byte for byte, so that a clone validates manifests offline. Both projects
publish them under the Apache License 2.0 (a copy is in `LICENSE` beside this file); the URL of each is
`{base_url}/<repository>/<tag>/<path>`. `workshop/k8s/crds.py` checks every read against the sha256
below. Regenerate this file with `python -m workshop crds sources`.
"""


def sources_markdown() -> str:
    """schemas/SOURCES.md: where every shipped file came from (a test keeps it equal to RELEASES)."""
    rows = [
        f"| {r.folder}/{name} | [{r.repo}](https://github.com/{r.repo}) @ {r.tag} | `{upstream}` | `{d}` |"
        for r in RELEASES
        for name, upstream, d in r.files
    ]
    return "\n".join(
        [
            SOURCES_HEADER.format(base_url=BASE_URL),
            "| file | repository @ tag | path at the tag | sha256 |",
            "|---|---|---|---|",
            *rows,
            "",
            "Kubernetes versions each release supports:",
            "",
            *[f"- {r.label}: {r.note}" for r in RELEASES],
            "",
        ]
    )


def pinned_list() -> str:
    """'Karpenter 1.5.0, ...; Kubeflow Trainer 2.1.0, ...': the releases that ship with the workbook."""
    return "; ".join(f"{NAME[f]} {', '.join(pinned_versions(f))}" for f in FAMILIES)
