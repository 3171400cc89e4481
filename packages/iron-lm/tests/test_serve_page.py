"""The chat page of ``iron-lm serve`` (``/``), in a real browser.

Playwright drives the system's Chromium (``/usr/bin/chromium``, never a
browser Playwright downloads) against the real server on 127.0.0.1 serving
the embedded tiny model (:func:`test_serve.serving`). Each test has a new
browser profile. Without Chromium the browser tests skip, saying so; the
checks of the served files need no browser.

``IRON_UPDATE_SCREENSHOT=1`` makes :func:`test_the_docs_screenshot` write
the page's picture the docs show (``docs/images/chat-page.png``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_serve import Server, serving

from iron.lm.serve import page as chat_page

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000
SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "chat-page.png"
STATIC = Path(chat_page.__file__).parent / "static"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM} (install it: apt-get install chromium); "
    "the chat page's browser tests need one",
)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as s:
        yield s


@pytest.fixture
def browser(tmp_path):
    """A new Chromium profile (a context) with one page; collects the page's
    console errors and Content-Security-Policy violations."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tmp_path / "profile",
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 900, "height": 640},
        )
        try:
            tab = context.new_page()
            tab.problems = []  # type: ignore[attr-defined]
            tab.on(
                "console",
                lambda m: m.type == "error" and tab.problems.append(m.text),
            )
            tab.on("pageerror", lambda e: tab.problems.append(str(e)))
            yield tab
        finally:
            context.close()


def expect(locator):
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def open_page(
    tab, server: Server, max_tokens: int = 24, temperature: float = 0, seed: str = ""
):
    tab.goto(server.url + "/")
    expect(tab.locator("#model")).to_have_text("model: iron-tiny")
    tab.click("#toggle-settings")
    tab.fill("#temperature", str(temperature))
    tab.fill("#max-tokens", str(max_tokens))
    tab.fill("#seed", seed)
    tab.click("#toggle-settings")


def ask(tab, text: str) -> None:
    tab.fill("#prompt", text)
    tab.press("#prompt", "Enter")


def answered(tab, n: int):
    """The n-th (from 1) answer's stats line, once that answer has ended."""
    stats = tab.locator(".message.assistant .stats").nth(n - 1)
    expect(stats).to_have_attribute(
        "data-completion", re.compile(r"\d+"), timeout=WAIT_MS
    )
    return stats


# -- the served files (no browser) ------------------------------------------


def test_the_page_and_its_files_are_served_with_their_types_and_a_strict_csp(server):
    for path, (name, media_type) in chat_page.FILES.items():
        response = httpx.get(server.url + path, timeout=10)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == media_type
        assert response.headers["content-security-policy"] == chat_page.CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.content == (STATIC / name).read_bytes()
    assert "script-src 'self';" in chat_page.CSP and "unsafe" not in chat_page.CSP
    # the Host allow-list guards the page as it does the API
    refused = httpx.get(server.url + "/", headers={"Host": "evil.example"}, timeout=10)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "host_not_allowed"
    assert httpx.get(server.url + "/health", timeout=10).json()["context"] == 256


def test_the_page_names_nothing_on_another_site():
    for file in STATIC.iterdir():
        text = file.read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text), file.name
        assert "<script>" not in text and "style=" not in text, file.name


def test_the_page_files_ship_in_the_wheel_package_data():
    # hatch ships every file under src/iron/lm (pyproject's only-include)
    assert {p.name for p in STATIC.iterdir()} == {"index.html", "chat.css", "chat.js"}


# -- in the browser -------------------------------------------------------------


@needs_chromium
def test_an_answer_streams_into_the_page_piece_by_piece(server, browser):
    tab = browser
    open_page(tab, server, max_tokens=40)
    # every text the answer shows, as it changes
    tab.evaluate(
        """() => {
            window.seen = [];
            new MutationObserver(() => {
                const t = document.querySelector('.message.assistant:last-child .text');
                if (t && t.textContent) window.seen.push(t.textContent);
            }).observe(document.getElementById('messages'),
                       {childList: true, subtree: true, characterData: true});
        }"""
    )
    ask(tab, "Tell me about rivers")
    stats = answered(tab, 1)
    seen = tab.evaluate("() => window.seen")
    text = tab.locator(".message.assistant .text").first.text_content()
    distinct = list(dict.fromkeys(seen))
    assert len(distinct) >= 3, distinct  # it grew several times
    assert all(text.startswith(s) for s in distinct)
    # the same request to the API gives the same (greedy) answer
    api = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            "model": "iron-tiny",
            "messages": [{"role": "user", "content": "Tell me about rivers"}],
            "max_tokens": 40,
            "temperature": 0,
        },
        timeout=60,
    ).json()
    assert text == api["choices"][0]["message"]["content"]
    assert (
        int(stats.get_attribute("data-completion")) == api["usage"]["completion_tokens"]
    )
    assert re.search(r"\d+ tokens · [\d.]+ tokens/s", stats.text_content())
    expect(tab.locator("#context-use")).to_have_text(
        re.compile(r"context: \d+ / 256 tokens")
    )
    assert tab.locator("#status").is_hidden()
    assert tab.problems == []  # no CSP violation, no script error


@needs_chromium
def test_llama_cpp_sampling_fields_are_sent_only_when_set(server, browser):
    tab = browser
    open_page(tab, server, max_tokens=12)
    sent = []
    tab.on(
        "request",
        lambda r: (
            sent.append(json.loads(r.post_data))
            if r.url.endswith("/v1/chat/completions")
            else None
        ),
    )
    ask(tab, "Tell me about rivers")
    answered(tab, 1)
    fields = ("min_p", "repeat_penalty", "presence_penalty", "frequency_penalty")
    assert sent and not any(f in sent[0] for f in fields)  # neutral: not sent
    tab.click("#toggle-settings")
    tab.fill("#repeat-penalty", "50")
    tab.fill("#min-p", "0.05")
    tab.click("#toggle-settings")
    ask(tab, "Tell me about rivers")
    answered(tab, 2)
    assert sent[-1]["repeat_penalty"] == 50 and sent[-1]["min_p"] == 0.05
    assert "presence_penalty" not in sent[-1]
    # the server applied them: the API with the same fields answers the same
    body = {k: sent[-1][k] for k in ("messages", "max_tokens", "temperature")}
    api = httpx.post(
        server.url + "/v1/chat/completions",
        json={**body, "repeat_penalty": 50, "min_p": 0.05},
        timeout=60,
    ).json()
    second = tab.locator(".message.assistant .text").nth(1).text_content()
    assert second == api["choices"][0]["message"]["content"]
    assert tab.problems == []


@needs_chromium
def test_stop_ends_the_stream_and_the_page_recovers(server, browser):
    tab = browser
    open_page(tab, server, max_tokens=200)
    # the tiny model writes 200 tokens in well under a second: the browser
    # receives them at 1.5 KB/s (a few tokens a second), so the stop comes
    # mid-stream
    cdp = tab.context.new_cdp_session(tab)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": 0,
            "downloadThroughput": 1500,
            "uploadThroughput": -1,
        },
    )
    ask(tab, "Write a long story")
    text = tab.locator(".message.assistant .text").first
    expect(text).not_to_have_text("", timeout=WAIT_MS)
    expect(tab.locator("#stop")).to_be_enabled()
    tab.keyboard.press("Escape")
    stats = tab.locator(".message.assistant .stats").first
    expect(stats).to_have_text(re.compile("^stopped"))
    expect(tab.locator("#send")).to_be_enabled()
    expect(tab.locator("#stop")).to_be_disabled()
    shown = text.text_content()
    full = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            "model": "iron-tiny",
            "messages": [{"role": "user", "content": "Write a long story"}],
            "max_tokens": 200,
            "temperature": 0,
        },
        timeout=60,
    ).json()["choices"][0]["message"]["content"]
    assert full.startswith(shown) and len(shown) < len(full)  # it ended there
    tab.wait_for_timeout(500)
    assert text.text_content() == shown  # and nothing came after
    # the page still answers: regenerate replaces the stopped answer
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": 0,
            "downloadThroughput": -1,
            "uploadThroughput": -1,
        },
    )
    tab.click("#toggle-settings")
    tab.fill("#max-tokens", "8")
    tab.click("#regenerate")
    answered(tab, 1)
    assert tab.locator(".message.assistant").count() == 1
    assert not stats.text_content().startswith("stopped")
    assert tab.problems == []


@needs_chromium
def test_a_second_turn_reuses_the_prefix_cache(server, browser):
    tab = browser
    open_page(tab, server, max_tokens=12)
    tab.click("#toggle-settings")
    tab.fill(
        "#system-prompt", "You answer in the voice of a lighthouse keeper, briefly."
    )
    ask(tab, "What did you see tonight?")
    first = answered(tab, 1)
    ask(tab, "And then?")
    second = answered(tab, 2)
    prompt1 = int(first.get_attribute("data-prompt"))
    cached1 = int(first.get_attribute("data-cached"))
    cached2 = int(second.get_attribute("data-cached"))
    # the first turn's own prompt (system prompt and question) is a prefix of
    # the second's, read from the cache
    assert cached1 < prompt1
    assert cached2 >= prompt1 - 1 > cached1
    assert "from the cache" in second.text_content()


@needs_chromium
def test_errors_are_shown_wrong_key_then_server_gone(browser):
    tab = browser
    with serving("--api-key", "sesame") as server:
        open_page(tab, server)
        status = tab.locator("#status")
        ask(tab, "Hello")
        expect(status).to_contain_text("API key (401)", timeout=WAIT_MS)
        expect(tab.locator("#settings")).to_be_visible()  # opened for the key
        assert tab.locator(".message.assistant").count() == 0
        tab.fill("#api-key", "sesame")
        tab.click("#regenerate")
        answered(tab, 1)
        expect(status).to_be_hidden()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(60)
        said = server.process.stderr.read()
        assert f"its chat page: {server.url}/" in said
        ask(tab, "Are you there?")
        expect(status).to_contain_text(
            "cannot be reached (network error)", timeout=WAIT_MS
        )
        expect(tab.locator("#send")).to_be_enabled()


@needs_chromium
@pytest.mark.parametrize("status", [503, 429])
def test_a_busy_server_is_said_so(server, browser, status):
    tab = browser
    open_page(tab, server)
    # the server's own 503 body (a full queue), answered to the page's request
    body = {
        "error": {
            "message": "64 requests wait for the device, the most this server holds",
            "type": "server_error",
            "param": None,
            "code": "queue_full",
        }
    }
    tab.route(
        "**/v1/chat/completions",
        lambda route: route.fulfill(
            status=status, json=body, headers={"Retry-After": "1"}
        ),
    )
    ask(tab, "Hello")
    status_line = tab.locator("#status")
    expect(status_line).to_contain_text(f"The server is busy ({status})")
    expect(status_line).to_contain_text("64 requests wait for the device")
    assert tab.locator(".message.assistant").count() == 0
    expect(tab.locator("#send")).to_be_enabled()
    # once it answers again, Regenerate asks again and the message goes
    tab.unroute("**/v1/chat/completions")
    tab.click("#regenerate")
    answered(tab, 1)
    expect(status_line).to_be_hidden()


@needs_chromium
@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("shutting_down", "The server is stopping (503)"),
        ("model_unavailable", "The model can no longer answer (503)"),
    ],
)
def test_a_503_that_is_not_busy_is_said_for_what_it_is(server, browser, code, said):
    tab = browser
    open_page(tab, server)
    body = {"error": {"message": "the server's words", "code": code}}
    tab.route(
        "**/v1/chat/completions",
        lambda route: route.fulfill(status=503, json=body),
    )
    ask(tab, "Hello")
    expect(tab.locator("#status")).to_contain_text(f"{said}: the server's words")


@needs_chromium
def test_an_error_in_the_stream_is_said_and_the_text_so_far_kept(server, browser):
    tab = browser
    open_page(tab, server)
    events = (
        'data: {"choices": [{"index": 0, "delta": {"content": "Half an"}}]}\n\n'
        'data: {"error": {"message": "the server is shutting down; the request '
        'was cancelled", "code": "shutting_down"}}\n\n'
    )
    tab.route(
        "**/v1/chat/completions",
        lambda route: route.fulfill(
            status=200, body=events, headers={"Content-Type": "text/event-stream"}
        ),
    )
    ask(tab, "Hello")
    expect(tab.locator("#status")).to_contain_text(
        "The answer stopped with an error: the server is shutting down"
    )
    expect(tab.locator(".message.assistant .text")).to_have_text("Half an")


@needs_chromium
def test_the_page_works_from_the_keyboard_alone(server, browser):
    tab = browser
    tab.goto(server.url + "/")
    expect(tab.locator("#model")).to_have_text("model: iron-tiny")
    # the message box has the focus: Shift+Enter is a new line, Enter sends
    assert tab.evaluate("() => document.activeElement.id") == "prompt"
    tab.keyboard.type("first line")
    tab.keyboard.press("Shift+Enter")
    tab.keyboard.type("second line")
    assert tab.input_value("#prompt") == "first line\nsecond line"
    tab.keyboard.press("Enter")
    answered(tab, 1)
    expect(tab.locator(".message.user .text")).to_have_text("first line\nsecond line")
    # Tab reaches the settings button; Enter opens them; focus is visible
    for _ in range(10):
        tab.keyboard.press("Shift+Tab")
        if tab.evaluate("() => document.activeElement.id") == "toggle-settings":
            break
    assert tab.evaluate("() => document.activeElement.id") == "toggle-settings"
    outline = tab.evaluate(
        "() => getComputedStyle(document.activeElement).outlineStyle"
    )
    assert outline != "none"
    tab.keyboard.press("Enter")
    expect(tab.locator("#settings")).to_be_visible()
    assert tab.evaluate("() => document.activeElement.id") == "system-prompt"
    tab.keyboard.press("Tab")
    assert tab.evaluate("() => document.activeElement.id") == "temperature"
    # every field has a label
    unlabelled = tab.evaluate(
        """() => [...document.querySelectorAll('input, textarea')]
                 .filter(e => !e.labels || e.labels.length === 0).map(e => e.id)"""
    )
    assert unlabelled == []
    assert tab.get_attribute("#messages", "aria-live") == "polite"


@needs_chromium
def test_the_page_fits_a_360_pixel_window(server, browser):
    tab = browser
    tab.set_viewport_size({"width": 360, "height": 740})
    open_page(tab, server, max_tokens=30)
    ask(tab, "A narrow window")
    answered(tab, 1)
    width = tab.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 360
    for control in ("#prompt", "#send", "#stop", "#regenerate", "#toggle-settings"):
        box = tab.locator(control).bounding_box()
        assert box is not None, control
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, control
    # the conversations go above the messages: the message box and the
    # answers keep the window's width
    for wide in ("#prompt", ".message.assistant"):
        assert tab.locator(wide).first.bounding_box()["width"] >= 300, wide


@needs_chromium
def test_the_docs_screenshot(server, browser, tmp_path):
    tab = browser
    # the tiny model's random weights: sampled (seeded) text shows better
    # than its greedy answers, which are often blank lines
    open_page(tab, server, max_tokens=24, temperature=0.7, seed="7")
    ask(tab, "Hello, who are you?")
    answered(tab, 1)
    ask(tab, "Tell me more.")
    answered(tab, 2)
    picture = tmp_path / "chat-page.png"
    tab.screenshot(path=str(picture))
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("IRON_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(picture, SCREENSHOT)
