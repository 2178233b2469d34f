"""Progress bars whose last state survives in a saved notebook.

tqdm's notebook bar is a widget: a live frontend redraws it, but a saved notebook (papermill, nbval, GitHub's
viewer) keeps only the text it had when first displayed, `0%| 0/20`. Here the widget is displayed under a
display id, and closing the bar replaces that display with the bar's final line as text. Outside a notebook it
is tqdm's ordinary text bar.
"""

from __future__ import annotations

import contextlib


def bar(total: int | None, desc: str, unit: str = "it"):
    from tqdm.auto import tqdm

    if not tqdm.__module__.startswith("tqdm.notebook"):
        return tqdm(total=total, desc=desc, unit=unit)
    from IPython.display import display

    widget_bar = tqdm(total=total, desc=desc, unit=unit, display=False)
    handle = display(widget_bar.container, display_id=True)
    original_close = widget_bar.close

    def close():
        original_close()
        if handle is not None:
            handle.update({"text/plain": str(widget_bar).strip()}, raw=True)

    widget_bar.close = close
    return widget_bar


@contextlib.contextmanager
def no_library_bars():
    """transformers' own bars ("Writing model shards: 0%| 0/4") for the length of a block: the caller says in
    a line what was done, which a saved notebook keeps."""
    from transformers.utils import logging

    was_enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()
