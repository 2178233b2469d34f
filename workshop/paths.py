"""Where the workbook's own files are: the checkout's folders every layer names (one definition each)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO / "notebooks"
IMAGES_DIR = REPO / "images"  # the tracked figures (`python -m workshop images`)
MANIFESTS_DIR = REPO / "manifests"  # the rendered YAML (`python -m workshop render`)
RESULTS_DIR = REPO / "benchmarks" / "results"
NOTEBOOKS_KO_DIR = (
    REPO / "notebooks-ko"
)  # generated: `python -m workshop i18n sync` (beside notebooks/: same ../ paths)
