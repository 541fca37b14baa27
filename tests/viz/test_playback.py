"""A decoding's playback page: one file holding every pass, Plotly once, nothing to fetch; two decodings side by side
on one page, stepped in step up to the longer one's last pass. In headless Chromium (Debian's package, driven by
Playwright) from file:// with the network cut off, a page plays to the last pass, pauses and steps back, showing each
pass's tokens in each pane."""

import base64
import gzip
import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs
from saved_records import tiny_ar_decoding, tiny_decoding

from bita.saved import saved_run
from viz.playback import playback_html

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def decoding():
    loaded, adapter, request, run = tiny_decoding()
    saved = saved_run(run, loaded, request, adapter, "random-adapter")
    return saved, playback_html(saved)


@pytest.fixture(scope="module")
def two_decodings(decoding):
    """BiTA's decoding beside our AR loop's of the same request, and their page."""
    loaded, _, request, _ = tiny_decoding()
    bita, ar = decoding[0], saved_run(tiny_ar_decoding(), loaded, request)
    return bita, ar, playback_html(bita, ar)


def unpacked(page: str, element: str) -> str:
    found = re.search(rf'<script type="application/gzip\+base64" id="{element}">([^<]*)</script>', page).group(1)
    return gzip.decompress(base64.b64decode(found)).decode()


def titles(frames: list[dict]) -> list[str]:
    return [frame["title"].split(" (")[0] for frame in frames]


def slider_end(page: str) -> int:
    return int(re.search(r'class="bita-frame" min="0" max="(\d+)"', page).group(1))


def test_the_page_holds_every_pass_plotly_once_and_fetches_nothing(decoding):
    saved, page = decoding
    frames = json.loads(unpacked(page, "bita-frames-0"))
    assert titles(frames) == [f"Pass {i} of {len(saved.steps) - 1}" for i in range(len(saved.steps))]
    assert all(frame["tree"]["data"] and frame["attention"]["data"][0]["type"] == "heatmap" for frame in frames)
    assert "After" in frames[1]["story"] and "<b>" in frames[1]["story"] and "**" not in frames[1]["story"]
    assert page.count('id="bita-plotly"') == 1 and unpacked(page, "bita-plotly") == get_plotlyjs()
    assert json.loads(unpacked(page, "bita-template"))["layout"]  # plotly_white, once for every figure
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", page)  # nothing loaded from elsewhere
    assert not re.search(r"https?://", page.split('id="bita-plotly"')[0])
    assert page.count('class="bita-tok ') == len(saved.tokens) and page.count('class="bita-pane"') == 1
    assert slider_end(page) == len(saved.steps) - 1
    assert len(page) < 3_000_000


def test_two_decodings_side_by_side_each_keep_their_passes_up_to_the_longer_ones_last(two_decodings):
    bita, ar, page = two_decodings
    assert len(ar.steps) > len(bita.steps)  # one pass a token against drafts accepted
    for element, saved in (("bita-frames-0", bita), ("bita-frames-1", ar)):
        frames = json.loads(unpacked(page, element))
        assert titles(frames) == [f"Pass {i} of {len(saved.steps) - 1}" for i in range(len(saved.steps))]
    ar_frames = json.loads(unpacked(page, "bita-frames-1"))
    assert "a plain AR pass" in ar_frames[3]["attention"]["layout"]["annotations"][0]["text"]
    assert page.count('id="bita-plotly"') == 1 and page.count('id="bita-template"') == 1
    assert page.count('class="bita-pane"') == 2 and page.count('class="bita-controls"') == 1
    assert "BiTA on tiny-llama-0" in page and "our AR loop on tiny-llama-0" in page
    assert page.count('class="bita-tok ') == len(bita.tokens) + len(ar.tokens)
    assert slider_end(page) == slider_end(playback_html(ar, bita)) == len(ar.steps) - 1


@contextmanager
def offline_page(path: Path):
    """``path`` open in headless Chromium with every request but file:// refused, once the player is ready; yields
    (page, the errors it raised, the addresses it asked for)."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "install Debian's chromium (setup.sh does: apt-get install chromium)"
    asked, errors = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 1200})
        context.route(re.compile(r"^(?!file:)"), lambda route: (asked.append(route.request.url), route.abort()))
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_function("document.body.dataset.ready", timeout=60_000)
        yield page, errors, asked
        browser.close()


def visible_tokens(page, pane: int = 0) -> list[int]:
    return page.evaluate(f"[...document.querySelectorAll('.bita-pane')[{pane}].querySelectorAll('.bita-tok')]"
                         ".filter(span => !span.hidden).map(span => Number(span.dataset.token))")


def played_to_the_end(page, last: int) -> None:
    """Play at 30 passes a second until the last frame, where the player stops."""
    page.locator(".bita-speed").select_option("30")
    page.locator(".bita-play").click()
    page.wait_for_function(f"document.querySelector('.bita-player').dataset.shown == {last}", timeout=60_000)
    page.get_by_text("▶ Play").wait_for(timeout=10_000)


def test_the_page_plays_to_the_last_pass_pauses_and_steps_back_offline(decoding, tmp_path):
    saved, page_html = decoding
    path = tmp_path / "decoding.html"
    path.write_text(page_html)
    emitted = [step.emitted for step in saved.steps]
    last = len(emitted) - 1
    with offline_page(path) as (page, errors, asked):
        first = visible_tokens(page)
        trees = page.evaluate("document.querySelector('.bita-tree').data.length")
        page.locator(".bita-play").click()
        page.locator(".bita-play").click()  # paused: no pass moves by itself now
        paused = int(page.locator(".bita-player").get_attribute("data-shown"))
        page.locator(".bita-forward").click()
        stepped = int(page.locator(".bita-player").get_attribute("data-shown"))
        played_to_the_end(page, last)
        final = visible_tokens(page)
        page.locator(".bita-back").click()
        back = visible_tokens(page)
        counter = page.locator(".bita-counter").text_content()
    assert not errors and not asked  # nothing fetched, nothing failed
    assert first == emitted[0] and trees >= 2
    assert stepped == paused + 1
    assert final == saved.tokens
    assert back == [t for step in emitted[:-1] for t in step] and counter == f"pass {last - 1} of {last}"


def test_two_decodings_play_in_step_the_shorter_one_holding_its_last_pass(two_decodings, tmp_path):
    bita, ar, page_html = two_decodings
    path = tmp_path / "side-by-side.html"
    path.write_text(page_html)
    last = len(ar.steps) - 1
    with offline_page(path) as (page, errors, asked):
        first = [visible_tokens(page, 0), visible_tokens(page, 1)]
        played_to_the_end(page, last)
        final = [visible_tokens(page, 0), visible_tokens(page, 1)]
        ended = page.locator(".bita-pane").nth(0).locator(".bita-title").text_content()
        page.locator(".bita-back").click()
        back = [visible_tokens(page, 0), visible_tokens(page, 1)]
        shown = [page.locator(".bita-pane").nth(i).get_attribute("data-shown") for i in (0, 1)]
    assert not errors and not asked
    assert first == [bita.steps[0].emitted, ar.steps[0].emitted]
    assert final == [bita.tokens, ar.tokens]
    assert ended.startswith(f"Pass {len(bita.steps) - 1} of {len(bita.steps) - 1}") and ended.endswith("it has ended")
    assert back == [bita.tokens, ar.tokens[:-1]] and shown == [str(len(bita.steps) - 1), str(last - 1)]
