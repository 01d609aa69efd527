"""The self-contained HTML report in a headless browser: it renders, and every figure loads.

Chromium (``apt-get install -y chromium``) opens a copy of report.html with a probe script that
counts the images that decoded (``complete`` and a natural width) once the page has loaded, and
writes the counts into the DOM that ``--dump-dom`` prints; a screenshot checks that the page draws
something. Without chromium the test skips with the reason, except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest
from conftest import in_ci
from test_evaluation import STEADY_START_S, synthetic_run, write_bag

from hexapod_control.evaluation.cli import main as evaluate_main

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER_TIMEOUT_S = 120
PROBE = """<script>window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (image) { return image.complete && image.naturalWidth > 0; });
  document.body.setAttribute('data-images', images.length);
  document.body.setAttribute('data-loaded', loaded.length);
  document.body.setAttribute('data-tables', document.querySelectorAll('table').length);
});</script></body>"""


@pytest.fixture(scope="module")
def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    message = f"no headless browser ({', '.join(BROWSERS)}) on PATH: apt-get install -y chromium"
    if in_ci():
        pytest.fail(message + " (CI=true: the HTML report must be checked)", pytrace=False)
    pytest.skip(message + " (outside CI; CI=true fails here)")


def headless(browser: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *arguments],
                          capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=False)


def test_html_report_renders_with_every_figure(browser, tmp_path):
    bag = write_bag(tmp_path / "run", synthetic_run())
    report = tmp_path / "report"
    assert evaluate_main([str(bag), "-o", str(report), "--steady-state-start", str(STEADY_START_S),
                          "--model-check-stride", "10"]) == 0
    figures = sorted(report.glob("figure_*.png"))
    assert len(figures) == 6  # position, orientation, norms, forces, speeds, model check
    page = report / "report.html"
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE))
    dom = headless(browser, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, dom.stderr[-2000:]
    counts = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert counts == {"images": str(len(figures)), "loaded": str(len(figures)), "tables": "4"}, counts
    shot = tmp_path / "shot.png"
    headless(browser, "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1200)
    assert np.mean(pixels[..., :3] < 0.5) > 0.01  # text and figure lines drawn on the white page
