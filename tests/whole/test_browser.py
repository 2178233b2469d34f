"""The learner's JupyterLab session, in a real browser: JupyterLab on loopback, headless Chromium (Debian's
`chromium` and `chromium-driver`, installed by .ci/run), Selenium.

Chapter 01 in Korean (WORKSHOP_LANG=ko) by default: nbval already executes the English chapter, the Korean one
runs nowhere else, and its wider text is where a label clips first (`WORKSHOP_BROWSER_LANGS=en,ko` adds the
English session). Opened through `workshop lab` (the README's command) at 1,000 px: Run All leaves no error
output, every widget control changes its output, no widget label or option is clipped, no printed sentence
breaks mid-word, and git status is the same afterwards.
Screenshots: out/browser/ (CI keeps them as artifacts).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workshop.paths import REPO

pytestmark = pytest.mark.slow

CHAPTER = "01_amx_instance_selection.ipynb"
SHOTS = REPO / "out" / "browser"
WIDTH, HEIGHT = 1000, 1000

# every widget label, readout and dropdown option: the text must fit its box
CLIPPED_JS = """
const canvas = document.createElement('canvas').getContext('2d');
const bad = [];
for (const el of document.querySelectorAll('.workshop-live .widget-label, .workshop-live .widget-readout,'
                                          + ' .workshop-live .widget-label-basic')) {
  if (el.textContent.trim() && el.scrollWidth > el.clientWidth + 1)
    bad.push(`label "${el.textContent}": ${el.scrollWidth} > ${el.clientWidth} px`);
}
for (const sel of document.querySelectorAll('.workshop-live select')) {
  const st = getComputedStyle(sel);
  canvas.font = st.font;
  const room = sel.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
  for (const o of sel.options) {
    const w = canvas.measureText(o.text).width;
    if (w > room) bad.push(`option "${o.text}": ${w.toFixed(0)} > ${room.toFixed(0)} px`);
  }
}
return bad;
"""

# a visual line break between two letters of one word, in printed output (stdout and say()'s HTML)
MIDWORD_JS = """
const word = /[\\p{L}\\p{N}_]/u, bad = [];
const roots = document.querySelectorAll(
  '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"], .workshop-say');
for (const root of roots) {
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    const text = node.textContent;  // one paragraph, or the whole of a printed output
    let prev = null, prevTop = null;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (ch === '\\n') { prev = null; prevTop = null; continue; }
      const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
      const rect = r.getClientRects()[0];
      if (!rect) continue;
      if (prev !== null && rect.top > prevTop + 2 && word.test(prev) && word.test(ch))
        bad.push(text.slice(Math.max(0, i - 20), i) + '|' + text.slice(i, i + 20));
      prev = ch; prevTop = rect.top;
    }
    if (bad.length > 20) return bad;
  }
}
return bad;
"""


# the notebook's kernel up and idle (JupyterLab may first ask which kernel: its preselected answer is the
# notebook's own)
KERNEL_JS = """
const ok = document.querySelector('.jp-Dialog .jp-mod-accept');
if (ok) ok.click();
const nb = window.jupyterapp.shell.currentWidget;
const k = nb && nb.sessionContext.session && nb.sessionContext.session.kernel;
return k && k.status === 'idle';
"""

# every code cell of the open notebook has run, and the kernel is idle again
DONE_JS = """
const nb = window.jupyterapp.shell.currentWidget;
const cells = Array.from(nb.content.model.cells).filter(c => c.type === 'code');
const idle = nb.sessionContext.session.kernel.status === 'idle';
return idle && cells.length > 0 && cells.every(c => c.executionCount !== null);
"""

# the outputs Run All left: errors and stderr, from the notebook's model
ERRORS_JS = """
const nb = window.jupyterapp.shell.currentWidget, bad = [];
for (const c of Array.from(nb.content.model.cells).filter(c => c.type === 'code'))
  for (const o of c.outputs.toJSON())
    if (o.output_type === 'error' || (o.output_type === 'stream' && o.name === 'stderr'))
      bad.push((o.ename || 'stderr') + ': ' + String(o.evalue || o.text).slice(0, 300));
return bad;
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git_status() -> str:
    done = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"not a git checkout (git status: {done.stderr.strip()[:200]})")
    return done.stdout


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    pytest.importorskip("jupyterlab")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},{HEIGHT}",
    ):
        opts.add_argument(arg)
    b = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver))
    b.set_window_size(WIDTH, HEIGHT)
    yield b
    b.quit()


def _lab(lang: str, tmp: Path):
    """`workshop lab` on a working copy beside notebooks/ (ignored by git); returns (process, url)."""
    from workshop.book import i18n

    copy = REPO / f"lab-browser-test-{lang}"
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir()
    if lang == "ko":  # the Korean chapter as `i18n generate` makes it from today's English one
        (copy / CHAPTER).write_text(i18n.generated()[CHAPTER], encoding="utf-8")
    port, token = _free_port(), os.urandom(8).hex()
    # every cell in the DOM (JupyterLab 4 otherwise renders only the cells near the viewport); the notebook's
    # own kernel started without asking; no news prompt over the page
    for plugin, value in (
        ("notebook-extension/tracker", '{"windowingMode": "none"}'),
        ("docmanager-extension/plugin", '{"autoStartDefaultKernel": true}'),
        ("apputils-extension/notification", '{"fetchNews": "false"}'),
    ):
        path = tmp / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "ws"),
        JUPYTER_RUNTIME_DIR=str(tmp / "rt"),
    )
    # `--dir` and `--lang` are the command's; the rest go to jupyter lab
    cmd = [
        sys.executable,
        "-m",
        "workshop",
        "lab",
        "--lang",
        lang,
        "--dir",
        str(copy),
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
        "--ServerApp.port_retries=0",
    ]
    # its own session: `workshop lab` starts jupyter lab as a child, so stopping means the whole group
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "lab.log", "w"),
        start_new_session=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, copy, f"http://127.0.0.1:{port}/lab/tree/{CHAPTER}?token={token}"
        time.sleep(0.5)
    _stop(proc)
    raise AssertionError(f"JupyterLab did not start: {(tmp / 'lab.log').read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """End `workshop lab` and the jupyter lab server and kernels it started (one process group): terminating
    the wrapper alone left them running, about 1 GB each, for the rest of the test session."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass


def _wait(b, js: str, timeout: float, what: str, *args):
    end = time.time() + timeout
    while time.time() < end:
        value = b.execute_script(js, *args)
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _run_all(b, url: str, lang: str):
    b.get(url)
    _wait(
        b,
        "return window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell') !== null",
        90,
        "the notebook to open",
    )
    _wait(b, KERNEL_JS, 120, "the notebook's kernel")
    b.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    time.sleep(2)
    _wait(b, DONE_JS, 300, "Run All to finish")
    _wait(
        b, "return document.querySelectorAll('.workshop-live .widget-output').length === 2", 30, "the widgets"
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.save_screenshot(str(SHOTS / f"01-{lang}-ran.png"))


def _outputs(b) -> list[str]:
    return b.execute_script(
        "return [...document.querySelectorAll('.workshop-live .widget-output')].map(e => e.innerText)"
    )


def _change_and_wait(b, index: int, act, what: str) -> str:
    """Do `act`, then wait until widget `index`'s output changes; the busy line must have shown meanwhile."""
    before = _outputs(b)[index]
    b.execute_script(
        "const box = document.querySelectorAll('.workshop-live')[arguments[0]]; window.__busy = false;"
        "new MutationObserver(() => { const h = box.querySelector('.widget-html');"
        " if (h && h.innerText.trim()) window.__busy = true; })"
        ".observe(box, {subtree: true, childList: true, characterData: true});",
        index,
    )
    act()
    after = ""
    end = time.time() + 60
    while time.time() < end:
        after = _outputs(b)[index]
        if after.strip() and after != before:
            break
        time.sleep(0.3)
    assert after and after != before, f"{what}: the output did not change"
    _wait(
        b,
        "const h = document.querySelectorAll('.workshop-live')[arguments[0]].querySelector('.widget-html');"
        "return !h.innerText.trim();",
        60,
        f"{what}: the busy line to clear",
        index,
    )
    after = _outputs(b)[index]
    assert b.execute_script("return window.__busy"), f"{what}: no busy state was shown while recomputing"
    return after


def _check_session(b, lang: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    errors = b.execute_script(ERRORS_JS)
    assert not errors, f"{lang}: error or stderr output after Run All: {errors}"
    clipped = b.execute_script(CLIPPED_JS)
    assert not clipped, f"{lang}: clipped widget text: {clipped}"
    broken = b.execute_script(MIDWORD_JS)
    assert not broken, f"{lang}: printed text breaks mid-word at {WIDTH} px: {broken}"
    discussed = b.execute_script(
        "const th = [...document.querySelectorAll('.jp-RenderedHTMLCommon th')]"
        ".find(t => t.innerText === 'gib_per_vcpu');"
        "if (!th) return 'missing'; const out = th.closest('.jp-OutputArea-output').getBoundingClientRect();"
        "return th.getBoundingClientRect().right <= out.right ? 'visible' : 'scrolled off';"
    )
    assert discussed == "visible", f"{lang}: the catalog table's gib_per_vcpu column is {discussed}"
    b.execute_script(
        "[...document.querySelectorAll('.jp-RenderedHTMLCommon th')]"
        ".find(t => t.innerText === 'gib_per_vcpu').scrollIntoView({block: 'center'});"
    )
    b.save_screenshot(str(SHOTS / f"01-{lang}-catalog.png"))

    # every control of both widgets: the planner's node slider, families and offload; the cost planner's
    # token slider, families and deadline (last: then the answer is the deadline sentence)
    plan_box, cost_box = b.find_elements(By.CSS_SELECTOR, ".workshop-live")
    b.execute_script("arguments[0].scrollIntoView()", plan_box)
    nodes = plan_box.find_element(By.CSS_SELECTOR, ".noUi-handle")
    _change_and_wait(b, 0, lambda: nodes.send_keys(Keys.ARROW_LEFT), "the node slider")
    plan_families = Select(plan_box.find_elements(By.CSS_SELECTOR, "select")[1])
    _change_and_wait(b, 0, lambda: plan_families.select_by_index(1), "the planner's families")
    offload = plan_box.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
    _change_and_wait(b, 0, offload.click, "the offload box")
    b.save_screenshot(str(SHOTS / f"01-{lang}-planner.png"))

    b.execute_script("arguments[0].scrollIntoView()", cost_box)
    handle = cost_box.find_element(By.CSS_SELECTOR, ".noUi-handle")
    _change_and_wait(b, 1, lambda: handle.send_keys(Keys.ARROW_RIGHT), "the token slider")
    cost_families = Select(cost_box.find_element(By.CSS_SELECTOR, "select"))
    _change_and_wait(b, 1, lambda: cost_families.select_by_index(1), "the cost planner's families")
    box = cost_box.find_element(By.CSS_SELECTOR, "input[type=number]")

    def deadline():
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys("0.1", Keys.ENTER)

    said = _change_and_wait(b, 1, deadline, "the deadline box")
    assert "--max-hours" not in said, f"{lang}: the widget names a flag the learner never typed: {said}"
    b.save_screenshot(str(SHOTS / f"01-{lang}-widgets.png"))
    assert not b.execute_script(CLIPPED_JS), f"{lang}: clipped widget text after the changes"


LANGS = [lang.strip() for lang in os.environ.get("WORKSHOP_BROWSER_LANGS", "ko").split(",") if lang.strip()]


@pytest.mark.parametrize("lang", LANGS)
def test_a_learners_jupyterlab_session(browser, lang, tmp_path):
    for old in SHOTS.glob(f"01-{lang}-*.png"):
        old.unlink()  # the artifacts are this run's
    status = _git_status()
    proc, copy, url = _lab(lang, tmp_path)
    try:
        try:
            _run_all(browser, url, lang)
            _check_session(browser, lang)
        except Exception:
            SHOTS.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(SHOTS / f"01-{lang}-failed.png"))
            raise
        browser.execute_script("window.jupyterapp.commands.execute('docmanager:save')")
        time.sleep(2)
        assert _git_status() == status, "the session (Run All, widget changes, save) changed git status"
    finally:
        _stop(proc)
        shutil.rmtree(copy, ignore_errors=True)
        print(f"screenshots: {SHOTS}")
