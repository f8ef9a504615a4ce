"""The what-if report as an admin sees it: report.html opened in headless Chromium
(Debian's chromium package, installed by scripts/bootstrap-system.sh), a screenshot of
its first screen taken, and the text on that screen checked: the answer, how far to trust
it, the warnings and what to do next must all be there before any scrolling."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from synergy_slurm.site import load_site
from synergy_slurm.slurm.release import Release
from synergy_slurm.whatif import report

from .site_history import CLUSTER_TOML, site_history
from .test_whatif import pipeline_run

WIDTH, HEIGHT = 1280, 800
# Appended to a copy of the page: the text of every element whose top is on the first
# screen, written into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener('load', () => {
  const seen = [];
  for (const el of document.body.querySelectorAll('h1,h2,p,li')) {
    const r = el.getBoundingClientRect();
    if (r.top < window.innerHeight && r.bottom > 0) seen.push(el.innerText);
  }
  const pre = document.createElement('pre');
  pre.id = 'first-screen';
  pre.textContent = seen.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (scripts/bootstrap-system.sh installs it)")
    return found


def browse(browser: str, url: str, *args: str) -> str:
    out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
                          "--virtual-time-budget=5000", *args, url],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_the_reports_first_screen_in_a_browser(tmp_path, paper_profiles):
    browser = chromium()
    hist, cluster = tmp_path / "history.txt", tmp_path / "v100.toml"
    hist.write_text(site_history(n=300, seed=5))
    cluster.write_text(CLUSTER_TOML)
    result = pipeline_run(hist, paper_profiles, found=load_site(str(cluster)).pools(),
                          release=Release.parse("22.05"))
    page = tmp_path / "report" / "report.html"
    page.parent.mkdir()
    report.write_html(result.doc, result.outcome, page, result.used)
    shot = tmp_path / "first-screen.png"
    browse(browser, page.as_uri(), f"--screenshot={shot}")
    assert png_size(shot) == (WIDTH, HEIGHT) and shot.stat().st_size > 20_000
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = browse(browser, probe.as_uri(), "--dump-dom")
    first = dom.split('<pre id="first-screen">', 1)[1].split("</pre>", 1)[0]
    assert "Expected with synergy: no change in mean JCT (1.00x)" in first, first
    assert "How far to trust it: the plain replay against what happened" in first
    assert "Warnings" in first and "misses 100% of the history's waiting" in first
    assert "ran on 4 of the 40 nodes described" in first
    assert "Next" in first and "synergy profile run --key" in first
    # The plots are there further down, each an image the browser decoded.
    assert dom.count('src="data:image/png;base64,') >= 2
