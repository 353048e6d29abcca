"""``fastbpe view``: the JSON the page draws, the server's answers, and the page itself in
a real headless browser (Debian's chromium + chromium-driver, driven by selenium).

The browser test skips, saying why, when selenium, chromium or chromedriver is missing.
``FASTBPE_VIEW_SCREENSHOT=docs/view.png`` makes it save the screenshot the docs show.
"""
from __future__ import annotations

import http.client
import json
import os
import tempfile
import shutil
import urllib.error
import urllib.request

import pytest

import fastbpe
from fastbpe import view
from fastbpe.bpe.encoding import get_toy_encoding


def post(url: str, body: bytes, host: str | None = None):
    req = urllib.request.Request(url + "api/tokenize", data=body, method="POST",
                                 headers={"Content-Type": "application/json", **({"Host": host} if host else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_tokenize_segments_counts_and_special_rules():
    enc = fastbpe.get_encoding("gpt2")
    r = view.tokenize({"gpt2": enc}, "hi <|endoftext|>\n", "ids")
    col = r["tokenizers"][0]
    assert [i for s in col["segments"] for i in s["ids"]] == enc.encode("hi <|endoftext|>\n", allowed_special="all")
    assert col["tokens"] == 4 and r["bytes"] == 17 and col["bytes_per_token"] == 17 / 4
    assert col["segments"][-1]["html"] == '<span class="ws">↵</span>\n'   # whitespace made visible
    refused = view.tokenize({"gpt2": enc}, "hi <|endoftext|>")["tokenizers"][0]
    assert "<|endoftext|>" in refused["error"] and "segments" not in refused
    as_text = view.tokenize({"gpt2": enc}, "<|endoftext|>", "text")["tokenizers"][0]
    assert as_text["tokens"] > 1
    # a control character is escaped, never sent raw into the page
    assert "\\x1b" in view.tokenize({"toy": get_toy_encoding()}, "\x1b")["tokenizers"][0]["segments"][0]["html"]
    with pytest.raises(TypeError, match="text must be a str"):
        view.tokenize({"gpt2": enc}, 3)
    with pytest.raises(ValueError, match="special must be one of"):
        view.tokenize({"gpt2": enc}, "x", "maybe")


def test_server_answers_and_refusals():
    with view.ViewServer({"toy": get_toy_encoding()}) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert b'id="text"' in r.read()
        assert post(server.url, b'{"text": "hi hi"}')[1]["tokenizers"][0]["tokens"] == 3
        assert post(server.url, b"[1]") == (400, {"error": "the body must be a JSON object"})
        assert post(server.url, b"{")[0] == 400
        assert post(server.url, b'{"text": 5}') == (400, {"error": "text must be a str, not int"})
        assert post(server.url, b'{"text": "x"}', host="evil.example:80")[0] == 403
        # a body too large is refused from its Content-Length, before it is read
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        conn.putrequest("POST", "/api/tokenize")
        conn.putheader("Content-Length", str(view.MAX_BODY + 1))
        conn.endheaders()
        r = conn.getresponse()
        assert r.status == 413 and "takes up to" in json.loads(r.read())["error"]
        conn.close()
    with pytest.raises(ValueError, match="port must be"):
        view.ViewServer({"toy": get_toy_encoding()}, port=-1)


def test_the_command_prints_its_url_serves_and_stops_on_ctrl_c():
    import signal
    import subprocess
    import sys

    pkg_parent = os.path.dirname(os.path.dirname(fastbpe.__file__))
    proc = subprocess.Popen([sys.executable, "-m", "fastbpe", "serve", "-t", "gpt2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=pkg_parent),
                            cwd=tempfile.gettempdir())  # not the checkout: its unbuilt fastbpe/ would shadow an install
    try:
        line = proc.stdout.readline().decode()
        assert line.startswith("fastbpe view: http://127.0.0.1:") and "(gpt2)" in line, proc.stderr.read()
        url = line.split()[2]
        assert post(url, b'{"text": "hi"}')[1]["tokenizers"][0]["segments"][0]["ids"] == [5303]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0 and b"stopped" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- the browser
def _driver():
    """A headless chromium driven by selenium, or pytest.skip naming what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if browser is None or driver_path is None:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,700", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(driver_path), options=opts)


def test_page_in_a_browser_types_text_and_reads_the_tokens_back():
    driver = _driver()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    toks = {"gpt2": fastbpe.get_encoding("gpt2"), "cl100k_base": fastbpe.get_encoding("cl100k_base")}
    text = "Hello  world\nfastbpe 東京 12345 <|endoftext|>"
    try:
        with view.ViewServer(toks) as server:
            driver.get(server.url)
            box = driver.find_element(By.ID, "text")
            box.clear()
            box.send_keys(text)
            wait = WebDriverWait(driver, 20)

            def drawn(special):  # the page shows this text under this rule (no request pending)
                return lambda d: d.execute_script(
                    "const c = document.getElementById('columns'); return [c.dataset.text, c.dataset.special];"
                ) == [text, special]
            wait.until(drawn("refuse"))
            # the library's rule: special-token text is refused by default, said in each column
            errors = driver.find_elements(By.CSS_SELECTOR, ".column .error")
            assert len(errors) == 2 and all("<|endoftext|>" in e.text for e in errors)
            # its id when the selector says so: the tokens read back are encode's
            driver.find_element(By.CSS_SELECTOR, "#special option[value=ids]").click()
            wait.until(drawn("ids"))
            assert not driver.find_elements(By.CSS_SELECTOR, ".column .error")
            for col in driver.find_elements(By.CSS_SELECTOR, ".column"):
                name = col.get_attribute("data-name")
                spans = col.find_elements(By.CSS_SELECTOR, ".t")
                ids = [int(i) for s in spans for i in s.get_attribute("data-ids").split()]
                assert ids == toks[name].encode(text, allowed_special="all"), name
                shown = "".join(s.get_attribute("textContent") for s in spans)
                # whitespace made visible: two spaces as dots, the newline marked (and kept)
                assert shown.startswith("Hello··world↵\nfastbpe·東京·12345·<|endoftext|>"), shown
                assert spans[0].get_attribute("title").startswith("id ")
                stats = col.find_element(By.CSS_SELECTOR, ".stats").text
                assert f"{len(ids)} tokens" in stats and "token tax" in stats
            cl100k = driver.find_element(By.CSS_SELECTOR, '.column[data-name="cl100k_base"] .stats').text
            n_gpt2 = len(toks["gpt2"].encode(text, allowed_special="all"))
            n_cl = len(toks["cl100k_base"].encode(text, allowed_special="all"))
            assert f"token tax {n_cl / n_gpt2:.2f}x vs gpt2" in cl100k
            shot = os.environ.get("FASTBPE_VIEW_SCREENSHOT")
            if shot:
                driver.save_screenshot(shot)
    finally:
        driver.quit()
