"""Headless Chromium for the report's tests (Debian's `chromium` and `chromium-driver`, driven by Selenium).

``make test`` and ``.ci/run`` install both when run as root; without them the tests that need a browser are skipped
with that message.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INSTALL = "apt install chromium chromium-driver (`make test` installs them as root)"

OVERFLOW_JS = """
const width = document.documentElement.clientWidth, bad = [];
if (document.documentElement.scrollWidth > width) bad.push('page: ' + document.documentElement.scrollWidth);
for (const el of document.querySelectorAll('body *')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > width + 1) bad.push(el.tagName + ' right edge ' + Math.round(r.right));
  const style = getComputedStyle(el);
  if (el.scrollWidth > el.clientWidth + 1 && style.overflowX !== 'visible' && el.clientWidth > 0)
    bad.push(el.tagName + ' cut: ' + el.scrollWidth + ' > ' + el.clientWidth);
}
return bad.slice(0, 20);
"""


def browser_missing() -> str | None:
    """Why no headless Chromium can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return f"no Chromium: {INSTALL}"
    if not shutil.which("chromedriver"):
        return f"no chromedriver: {INSTALL}"
    return None


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium window of ``width`` x ``height`` CSS pixels (no network, no download of a driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}", "--force-device-scale-factor=1", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def open_everything(driver: Any, page: Path) -> None:
    """Load a local page and open every ``<details>``, so that hidden tables are laid out too."""
    driver.get(page.resolve().as_uri())
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")


def overflowing(driver: Any) -> list[str]:
    """Elements that run past the window's right edge or cut their content horizontally."""
    return list(driver.execute_script(OVERFLOW_JS))


def screenshot(driver: Any, path: Path, height: int | None = None) -> Path:
    """A PNG of the page: the window, or the first ``height`` pixels of the whole page."""
    if height:
        width = driver.execute_script("return document.documentElement.clientWidth")
        driver.set_window_size(width, height)
    driver.save_screenshot(str(path))
    return path
