"""report.html and index.html of a miniature study in a real browser: the system's headless
Chromium (Debian's `chromium`, scripts/install_browser.sh), driven over the DevTools protocol
(tests/browser.py). Fails on a console error or uncaught exception, an image that did not load,
a link of the index that does not resolve, interactive charts that did not render, or a page
wider than a phone's screen; saves screenshots (desktop and 390 px) under the test's tmp dir."""
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.browser import Browser, find_chromium
from tests.synthetic_study import write_study

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (Debian: apt-get install chromium; "
                                                           "scripts/install_browser.sh)")

CHECK_IMAGES = """[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt || i.src.slice(0, 60))"""
CHARTS = """[...document.querySelectorAll('figure.chart > div')].map(d => {
  const c = d.querySelector('canvas'); return {id: d.id, rendered: d.dataset.rendered === '1',
  w: c ? c.width : 0, h: c ? c.height : 0}; })"""
WIDTH = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from grpo_research.analysis.report import render_index
    from grpo_research.analysis.study import report_study

    root = tmp_path_factory.mktemp("browser")
    write_study(root / "runs" / "mini", seeds=(1, 2), steps=60)
    report = report_study(root / "runs" / "mini", root / "results" / "mini", n_boot=200)
    index = render_index(root / "results")
    return report, index


def test_report_and_index_render_in_chromium(reports, tmp_path):
    report, index = reports
    with Browser(CHROMIUM) as browser:
        for name, width in (("desktop", 1280), ("phone", 390)):
            page = browser.open(report.as_uri(), width=width, height=900, mobile=width < 500)
            shot = page.screenshot(tmp_path / f"report_{name}.png")
            assert page.errors() == [], (name, page.errors())
            assert page.evaluate(CHECK_IMAGES) == [], name
            charts = page.evaluate(CHARTS)
            assert len(charts) >= 4 and all(c["rendered"] and c["w"] > 0 and c["h"] > 0 for c in charts), charts
            scroll, client = page.evaluate(WIDTH)
            assert scroll <= client, f"{name}: the page is {scroll} px wide in a {client} px window"
            assert shot.stat().st_size > 10_000
        # the interactive legend toggles a variant
        shown = page.evaluate("document.querySelector('figure.chart .u-legend .u-series:nth-child(2)')"
                              ".classList.contains('u-off')")
        page.evaluate("document.querySelector('figure.chart .u-legend .u-series:nth-child(2) th')"
                      ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        hidden = page.evaluate("document.querySelector('figure.chart .u-legend .u-series:nth-child(2)')"
                               ".classList.contains('u-off')")
        assert (shown, hidden) == (False, True)

        page = browser.open(index.as_uri())
        page.screenshot(tmp_path / "index.png")
        assert page.errors() == []
        links = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
        assert links, "the index links no report"
        for link in links:
            url = urlparse(link)
            assert url.scheme == "file" and Path(unquote(url.path)).is_file(), link
            target = browser.open(link)
            assert target.evaluate("document.querySelector('h1') !== null") and target.errors() == [], link


def test_the_browser_check_fails_on_a_broken_page(tmp_path):
    """The checks above can fail: a console error, a missing image and a dead link are seen."""
    page_file = tmp_path / "broken.html"
    page_file.write_text("<!DOCTYPE html><html><head><meta charset=utf-8></head><body><h1>x</h1>"
                         "<img alt=missing src='nope.png'><a href='gone.html'>gone</a>"
                         "<script>console.error('boom'); undefined_function();</script></body></html>")
    with Browser(CHROMIUM) as browser:
        page = browser.open(page_file.as_uri())
        errors = page.errors()
        assert any("boom" in e for e in errors) and any("undefined_function" in e for e in errors), errors
        assert page.evaluate(CHECK_IMAGES) == ["missing"]
        (link,) = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
        assert not Path(unquote(urlparse(link).path)).is_file()


def test_the_atlas_report_renders_in_chromium(tmp_path):
    from tests.test_atlas import atlas_dir as make_atlas_dir
    from grpo_research.analysis.atlas_report import write_atlas

    exp, runs = make_atlas_dir.__wrapped__(tmp_path)
    write_atlas(exp / "claims.yaml", exp, runs, tmp_path / "atlas", improvement=False)
    with Browser(CHROMIUM) as browser:
        for name, width in (("desktop", 1280), ("phone", 390)):
            page = browser.open((tmp_path / "atlas" / "report.html").as_uri(), width=width, mobile=width < 500)
            shot = page.screenshot(tmp_path / f"atlas_{name}.png")
            assert page.errors() == [], (name, page.errors())
            assert page.evaluate(CHECK_IMAGES) == [], name
            scroll, client = page.evaluate(WIDTH)
            assert scroll <= client, f"{name}: the page is {scroll} px wide in a {client} px window"
            verdicts = page.evaluate("[...document.querySelectorAll('td span.reproduced, td span.contradicted, "
                                     "td span.inconclusive')].length")
            rerun = page.evaluate("document.querySelectorAll('td span.rerun').length")
            # every tested claim of the fixture, and its entropy claim, whose runs lack the metric
            assert (verdicts, rerun) == (7, 1) and shot.stat().st_size > 10_000
