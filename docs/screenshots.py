"""Redo the report's screenshots in the docs (docs/images/report-*.png) from a small offline run, in headless Chromium.

``python docs/screenshots.py`` runs a small demo (SynthWorld + SimVLM + the heuristic editor, as ``videvolve demo``
does, with the held-out comparison; about 2 minutes on 2 cores), builds its report and shoots, at 1400 px:

- ``report-top.png``: the report's first screen (getting-started.md);
- ``report-lineage.png``: the lineage section, its tree and its table (index.md);
- ``report-traces.png``: one trace in the trace viewer (index.md);
- ``report-editor.png``: one editor proposal, its tool calls, trials and diff (index.md).

A trace or proposal too long for one picture is shown as its beginning and its end, with a band between them
saying what was left out ("84 more observed times").

``--out DIR`` keeps the run there (a temporary folder otherwise); ``--from-run RUN`` shoots an existing run's report
instead (rebuilt by the current code, as ``videvolve report --run RUN`` does). ``--demo-run DIR`` also redoes
``demo_progress.png`` (benchmarks.md): from the output folder of ``make demo`` (``demo/``, or its ``demo/run``), it
rebuilds that run's report and copies its ``progress.png``; without it that image is left as it is. Needs Chromium and
chromedriver (tests/browser.py).
"""

from __future__ import annotations

import argparse
import base64
import io
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
IMAGES = HERE / "images"
WIDTH, FIRST_SCREEN = 1400, 900  # the window (the report's test checks 1400 px); the first screen's height
MARGIN, BELOW = 16, 6  # CSS pixels kept beside and above a section, and below it (the next element is 8 px on)
MAX_BYTES = 400_000

# The small demo the pictures come from (chosen so that its report has an accepted revision, editor transcripts
# with trials and diffs, traces, diagnoses and the held-out comparison; 2 minutes on 2 cores). By hand:
#   videvolve demo --out DIR --videos 8 --minutes 3 --iterations 2 --children 2 --seed 0
DEMO_COMMAND = "videvolve demo --out DIR --videos 8 --minutes 3 --iterations 2 --children 2 --seed 0"

# Each picture is a rectangle of the page: from the top of ``start`` to the bottom of ``end`` (JavaScript that
# returns elements), opened where it has <details>.
SECTION_JS = """
const h2 = [...document.querySelectorAll('h2')].find(h => h.textContent.trim() === arguments[0]);
if (!h2) return null;
let el = h2.nextElementSibling, first = null;
while (el && el.tagName !== 'H2') {
  if (el.tagName === 'DETAILS' && !first) first = el;
  el = el.nextElementSibling;
}
return [h2, first];
"""


def _section(driver: Any, title: str, open_first: bool) -> tuple[Any, Any]:
    found = driver.execute_script(SECTION_JS, title)
    if not found or (open_first and not found[1]):
        raise SystemExit(f"the report has no {title!r} section{' with an entry' if open_first else ''}: "
                         "try another --out run (a larger world or more iterations)")
    return found[0], found[1]


def _body(driver: Any) -> tuple[float, float]:
    """The report body's left and right edges, with MARGIN either side."""
    left, right = driver.execute_script("const r = document.body.getBoundingClientRect(); return [r.left, r.right];")
    return max(0.0, left - MARGIN), min(float(WIDTH), right + MARGIN)


def _capture(driver: Any, top: float, bottom: float) -> Any:
    """The page between ``top`` and ``bottom`` (page coordinates), as wide as the report's body, as a PIL image."""
    from PIL import Image

    left, right = _body(driver)
    clip = {"x": left, "y": max(0.0, top), "width": right - left, "height": bottom - max(0.0, top), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot",
                                  {"format": "png", "clip": clip, "captureBeyondViewport": True})
    return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")


def _cut(width: int, words: str) -> Any:
    """A band that says what was left out between two parts of a picture."""
    from PIL import Image, ImageDraw, ImageFont

    band = Image.new("RGB", (width, 34), "white")
    draw = ImageDraw.Draw(band)
    try:
        font: Any = ImageFont.truetype("DejaVuSans-Oblique.ttf", 15)
    except OSError:
        font = ImageFont.load_default()
    for x in range(MARGIN, width - MARGIN, 12):
        draw.line([(x, 17), (x + 6, 17)], fill="#999999", width=1)
    text = f"  {words}  "
    w = draw.textlength(text, font=font)
    draw.rectangle([(width - w) / 2, 6, (width + w) / 2, 28], fill="white")
    draw.text((width / 2, 17), text, fill="#555555", font=font, anchor="mm")
    return band


def _shot(driver: Any, parts: list[tuple[float, float]], path: Path, left_out: str = "") -> Path:
    """One picture of the page's ``parts`` (top, bottom), a band saying ``left_out`` between them when several."""
    from PIL import Image

    edges = [(top - MARGIN if i == 0 else top, bottom + BELOW if i == len(parts) - 1 else bottom)
             for i, (top, bottom) in enumerate(parts)]  # the cuts are exact: no slice of a neighbour
    images = [_capture(driver, top, bottom) for top, bottom in edges]
    width = images[0].width
    pieces = [images[0]]
    for image in images[1:]:
        pieces += [_cut(width, left_out), image]
    picture = Image.new("RGB", (width, sum(p.height for p in pieces)), "white")
    y = 0
    for piece in pieces:
        picture.paste(piece, (0, y))
        y += piece.height
    return _save(picture, path)


def _save(image: Any, path: Path) -> Path:
    """Write an optimized PNG; a palette of 256 colours when it is still above MAX_BYTES."""
    from PIL import Image

    buf = io.BytesIO()
    image.save(buf, "PNG", optimize=True)
    if buf.tell() > MAX_BYTES:
        buf = io.BytesIO()
        image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(buf, "PNG", optimize=True)
    path.write_bytes(buf.getvalue())
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
          f"{image.width} x {image.height} px, {buf.tell() // 1000} KB")
    return path


def _rect(driver: Any, el: Any) -> tuple[float, float]:
    """An element's top and bottom in page coordinates."""
    top, bottom = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.top + window.scrollY, r.bottom + window.scrollY];",
        el)
    return float(top), float(bottom)


def _editor(driver: Any, images: Path) -> Path:
    """The first proposal: its first tool calls up to its first trial's JSON, then its decision, trials and diff."""
    h2, proposal = _section(driver, "Editor", open_first=True)
    driver.execute_script("arguments[0].open = true", proposal)
    rows = proposal.find_elements("css selector", "table tr")[1:]
    first_trial = next((i for i, r in enumerate(rows) if r.text.split(" ", 1)[0] == "tool" and "trial(" in r.text),
                       0)
    decision = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].text.startswith("decision")), len(rows) - 1)
    if decision <= first_trial + 1:
        return _shot(driver, [(_rect(driver, h2)[0], _rect(driver, proposal)[1])], images / "report-editor.png")
    return _shot(driver, [(_rect(driver, h2)[0], _rect(driver, rows[first_trial])[1]),
                          (_rect(driver, rows[decision])[0], _rect(driver, proposal)[1])],
                 images / "report-editor.png", f"{decision - first_trial - 1} more steps")


def _trace(driver: Any, images: Path, rows_kept: int = 3) -> Path:
    """A multiple-choice trace (its options), its first rows of thumbnails, then its last row, answer and result."""
    h2, first = _section(driver, "Traces", open_first=True)
    traces = driver.execute_script(
        "let el = arguments[0], out = []; while (el && el.tagName !== 'H2') "
        "{ if (el.tagName === 'DETAILS') out.push(el); el = el.nextElementSibling; } return out;", first)
    trace = next((t for t in traces if "(mcq)" in t.find_element("tag name", "summary").text), first)
    driver.execute_script("arguments[0].open = true", trace)
    figures = trace.find_elements("css selector", ".thumbs figure")
    rows: dict[float, list[Any]] = {}
    for figure in figures:
        rows.setdefault(_rect(driver, figure)[0], []).append(figure)
    tops = sorted(rows)
    if len(tops) <= rows_kept + 3:
        return _shot(driver, [(_rect(driver, h2)[0], _rect(driver, trace)[1])], images / "report-traces.png")
    left_out = sum(len(rows[t]) for t in tops[rows_kept:-2])  # the last row may be short: its row before too
    return _shot(driver, [(_rect(driver, h2)[0], _rect(driver, rows[tops[rows_kept - 1]][0])[1]),
                          (tops[-2], _rect(driver, trace)[1])],
                 images / "report-traces.png", f"{left_out} more observed times")


def shoot(report: Path, images: Path) -> list[Path]:
    """The four pictures of ``report`` (an index.html) into ``images``."""
    sys.path.insert(0, str(ROOT))
    from tests.browser import browser_missing, chromium

    why = browser_missing()
    if why:
        raise SystemExit(why)
    images.mkdir(parents=True, exist_ok=True)
    with chromium(WIDTH, FIRST_SCREEN) as driver:
        driver.get(report.resolve().as_uri())
        out = [_shot(driver, [(MARGIN, FIRST_SCREEN - BELOW)], images / "report-top.png")]
        h2, _ = _section(driver, "Lineage", open_first=False)
        table = driver.execute_script(
            "let el = arguments[0].nextElementSibling; while (el && el.tagName !== 'TABLE') el = el.nextElementSibling;"
            " return el;", h2)
        out.append(_shot(driver, [(_rect(driver, h2)[0], _rect(driver, table or h2)[1])],
                         images / "report-lineage.png"))
        out.append(_trace(driver, images))
        out.append(_editor(driver, images))
    return out


def demo_progress(demo: Path, images: Path) -> Path:
    """Rebuild the report of ``make demo``'s run and copy its progress plot as demo_progress.png."""
    from videvolve.report import build_report

    run = demo / "run" if (demo / "run" / "settings.json").is_file() else demo
    if not (run / "settings.json").is_file():
        raise SystemExit(f"{demo} is not the output of `make demo` (no run/settings.json)")
    plot = build_report(run).parent / "progress.png"
    target = images / "demo_progress.png"
    shutil.copyfile(plot, target)
    print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: copied from {plot}")
    return target


def main(argv: list[str] | None = None) -> int:
    """Run the small demo (or take ``--from-run``), build its report and write the pictures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the small demo's folder here (its run is OUT/run)")
    parser.add_argument("--from-run", type=Path, help="shoot this run's report instead of running the small demo")
    parser.add_argument("--demo-run", type=Path, help="a `make demo` output folder: redo demo_progress.png from it")
    parser.add_argument("--images", type=Path, default=IMAGES, help="where the pictures go (default docs/images)")
    args = parser.parse_args(argv)
    from videvolve.report import build_report

    with tempfile.TemporaryDirectory(prefix="videvolve-shots-") as tmp:
        if args.from_run:
            run = args.from_run
        else:
            from videvolve.cli.demo import run_demo

            out = args.out or Path(tmp)
            print(f"the small demo: {DEMO_COMMAND.replace('DIR', str(out))}")
            if run_demo(out, videos=8, minutes=3.0, iterations=2, children=2, seed=0) != 0:
                return 1
            run = out / "run"
        shoot(build_report(run), args.images)
    if args.demo_run:
        demo_progress(args.demo_run, args.images)
    else:
        print("docs/images/demo_progress.png left as it is (redo it with --demo-run DEMO, the output of `make demo`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
