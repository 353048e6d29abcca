"""``fastbpe view``: a local web page where text is tokenized as you type, side by side.

As the tiktokenizer page shows it: for each tokenizer, the text with coloured token
boundaries (the ids and bytes on hover; tokens that share a character outlined, as
``show`` groups them), whitespace and control characters made visible (``show``'s
marks and escapes), the token count, bytes per token and the token tax against a
reference chosen on the page (tokens / the reference's tokens for the same text).
Special-token text follows the library's rule (``fastbpe.special``): refused by default
(the column says which token and where), or encoded as its id, or as ordinary text,
as the page's selector says.

Decisions:

- **Local only**: the server binds 127.0.0.1 on a free port (or ``--port``), serves the
  page and one JSON endpoint, and answers only requests whose ``Host`` is that address
  or ``localhost`` (a web page elsewhere cannot reach it through DNS rebinding).
  Python's standard library only (``http.server`` in a thread).
- **The server tokenizes, the page draws**: ``POST /api/tokenize`` with
  ``{"text": str, "special": "refuse" | "ids" | "text"}`` returns each tokenizer's
  segments (HTML-escaped text, ids, hover text) and counts; bodies over
  ``MAX_BODY`` bytes are refused (413), malformed ones get 400 naming what is wrong.

>>> from fastbpe.bpe.encoding import get_toy_encoding
>>> r = tokenize({"toy": get_toy_encoding()}, "hi hi")
>>> r["tokenizers"][0]["tokens"], [s["ids"] for s in r["tokenizers"][0]["segments"]]
(3, [[256], [32], [256]])
"""
from __future__ import annotations

import json
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import show

#: The largest request body the server reads (bytes): about a book's worth of text.
MAX_BODY = 2_000_000

SPECIAL_RULES = {"refuse": {}, "ids": {"allowed_special": "all"}, "text": {"disallowed_special": ()}}

DEFAULT_TOKENIZERS = ("cl100k_base", "o200k_base", "gpt2")


def tokenize(toks: dict[str, object], text: str, special: str = "refuse") -> dict:
    """What the page shows for ``text``: per tokenizer, its segments and counts, or the
    error its special-token rule raised."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if special not in SPECIAL_RULES:
        raise ValueError(f"special must be one of {sorted(SPECIAL_RULES)}, got {special!r}")
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    out = {"bytes": n_bytes, "chars": len(text), "tokenizers": []}
    for name, tok in toks.items():
        try:
            segs = show.segments(tok, text, **SPECIAL_RULES[special])
        except ValueError as exc:
            out["tokenizers"].append({"name": name, "error": show.terminal_safe(str(exc).splitlines()[0])})
            continue
        n = sum(len(s.ids) for s in segs)
        out["tokenizers"].append({
            "name": name, "tokens": n, "bytes_per_token": n_bytes / n if n else None,
            "segments": [{"html": show.html_text(s.text), "ids": s.ids, "title": show.hover(s),
                          "partial": s.partial} for s in segs]})
    return out


# --------------------------------------------------------------------------- the page
_PAGE_CSS = """
body { margin: 1.5em; }
textarea { width: 100%; height: 7em; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 1em;
           box-sizing: border-box; }
.controls { margin: 0.5em 0 1em; color: #444; }
.columns { display: flex; gap: 1em; flex-wrap: wrap; }
.column { flex: 1 1 22em; min-width: 18em; }
.column h2 { font-size: 1em; margin: 0 0 0.3em; }
.stats { color: #555; font-size: 0.9em; margin-bottom: 0.4em; }
.error { color: #a00; font-size: 0.9em; }
"""

_PAGE_JS = r"""
const COLOURS = __COLOURS__;
const text = document.getElementById('text');
const special = document.getElementById('special');
const reference = document.getElementById('reference');
const columns = document.getElementById('columns');
let pending = null, serial = 0;

function fmt(x, digits) { return x === null || x === undefined ? 'n/a' : x.toFixed(digits); }

function draw(result, sent) {
  const ref = result.tokenizers.find(t => t.name === reference.value && t.error === undefined);
  columns.innerHTML = '';
  for (const tok of result.tokenizers) {
    const col = document.createElement('div');
    col.className = 'column';
    col.dataset.name = tok.name;
    const h = document.createElement('h2');
    h.textContent = tok.name;
    col.appendChild(h);
    if (tok.error !== undefined) {
      const e = document.createElement('div');
      e.className = 'error';
      e.textContent = tok.error;
      col.appendChild(e);
      columns.appendChild(col);
      continue;
    }
    const stats = document.createElement('div');
    stats.className = 'stats';
    const tax = ref && ref.tokens ? (tok.tokens / ref.tokens).toFixed(2) + 'x vs ' + ref.name : 'n/a';
    stats.textContent = tok.tokens + ' tokens, ' + result.bytes + ' bytes, ' + result.chars + ' characters, '
      + fmt(tok.bytes_per_token, 2) + ' bytes/token, token tax ' + tax;
    stats.dataset.tokens = tok.tokens;
    col.appendChild(stats);
    const box = document.createElement('div');
    box.className = 'tokens';
    tok.segments.forEach((s, i) => {
      const span = document.createElement('span');
      span.className = s.partial ? 't partial' : 't';
      span.style.background = COLOURS[i % COLOURS.length];
      span.title = s.title;
      span.dataset.ids = s.ids.join(' ');
      span.innerHTML = s.html;  // escaped by the server (show.html_text)
      box.appendChild(span);
    });
    col.appendChild(box);
    columns.appendChild(col);
  }
  columns.dataset.text = sent.text;  // what is drawn (tests wait for it)
  columns.dataset.special = sent.special;
}

async function update() {
  const mine = ++serial;
  const sent = {text: text.value, special: special.value};
  const response = await fetch('/api/tokenize', {
    method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(sent)});
  const result = await response.json();
  if (mine !== serial) return;  // a newer request is on its way
  if (!response.ok) { columns.textContent = result.error; return; }
  draw(result, sent);
}

function later() { clearTimeout(pending); pending = setTimeout(update, 120); }
text.addEventListener('input', later);
special.addEventListener('change', update);
reference.addEventListener('change', update);
update();
"""


def render_page(names: list[str], reference: str | None = None) -> str:
    """The page (inline CSS and script, no outside resources)."""
    import html

    e = html.escape
    reference = reference if reference in names else names[0]
    options = "".join(f'<option value="{e(n, quote=True)}"{" selected" * (n == reference)}>{e(n)}</option>'
                      for n in names)
    js = _PAGE_JS.replace("__COLOURS__", json.dumps(list(show.HTML_BACKGROUNDS)))
    sample = "Hello world! Tokenizers split text into tokens.\n\tIndented line\nDas Übel, 東京タワー, 12345"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>fastbpe view</title>\n"
        f"<style>{show.CSS}{_PAGE_CSS}</style>\n</head>\n<body>\n<h1>fastbpe view</h1>\n"
        f'<textarea id="text" spellcheck="false" autofocus>{e(sample)}</textarea>\n'
        '<div class="controls">special-token text: <select id="special">'
        '<option value="refuse">refused (the library\'s default)</option>'
        '<option value="ids">its id (allowed_special="all")</option>'
        '<option value="text">ordinary text (disallowed_special=())</option></select>'
        f' &nbsp; token tax against: <select id="reference">{options}</select></div>\n'
        '<div class="columns" id="columns"></div>\n'
        f"<script>{js}</script>\n</body>\n</html>\n")


# --------------------------------------------------------------------------- the server
class _Handler(BaseHTTPRequestHandler):
    server_version = "fastbpe-view"

    def log_message(self, format, *args):  # noqa: A002  (quiet: the terminal shows the URL only)
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json; charset=utf-8")

    def _local(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if host in ("127.0.0.1", "localhost"):
            return True
        self._json(HTTPStatus.FORBIDDEN, {"error": "only http://127.0.0.1 serves this page"})
        return False

    def do_GET(self):  # noqa: N802  (http.server's name)
        if not self._local():
            return
        if self.path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, self.server.page.encode("utf-8"), "text/html; charset=utf-8")
        elif self.path == "/api/tokenizers":
            self._json(HTTPStatus.OK, list(self.server.toks))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {self.path}"})

    def do_POST(self):  # noqa: N802
        if not self._local():
            return
        if self.path != "/api/tokenize":
            return self._json(HTTPStatus.NOT_FOUND, {"error": f"no endpoint {self.path}"})
        try:
            size = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "a Content-Length header is required"})
        if not 0 <= size <= MAX_BODY:
            self.close_connection = True  # the body stays unread
            return self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                              {"error": f"the text is {size:,} bytes; this page takes up to {MAX_BODY:,}"})
        try:
            request = json.loads(self.rfile.read(size).decode("utf-8"))
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
            result = tokenize(self.server.toks, request.get("text"), request.get("special", "refuse"))
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc).splitlines()[0]})
        self._json(HTTPStatus.OK, result)


class ViewServer(ThreadingHTTPServer):
    """The page's server on 127.0.0.1, running in a daemon thread; ``url``, ``close()``."""

    daemon_threads = True

    def __init__(self, toks: dict[str, object], port: int = 0, reference: str | None = None):
        if not toks:
            raise ValueError("view needs at least one tokenizer")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int from 0 (any free port) to 65535, got {port!r}")
        super().__init__(("127.0.0.1", port), _Handler)
        self.toks = dict(toks)
        self.page = render_page(list(self.toks), reference)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/"
        self._thread = threading.Thread(target=self.serve_forever, name="fastbpe-view", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------- the command
def add_command(sub, kit) -> None:
    """``fastbpe view``'s parser (``kit``: the CLI's shared helpers)."""
    v = sub.add_parser("view", aliases=["serve"],
                       help="a local web page: type text, see it tokenized by several tokenizers side by side")
    v.add_argument("--tokenizer", "-t", action="append", metavar="TOKENIZER",
                   help=kit.tok_help + f" (repeatable; default {', '.join(DEFAULT_TOKENIZERS)})")
    v.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    v.add_argument("--reference", metavar="NAME", help="the token tax's reference at first (default: the first)")
    v.add_argument("--open", action="store_true", help="open the page in the default browser")
    v.set_defaults(func=lambda args: run(args, kit))


def run(args, kit) -> int:
    toks = {}
    for spec in args.tokenizer or DEFAULT_TOKENIZERS:
        name = kit.tokenizer_name(spec, None)
        toks[spec if name in toks else name] = kit.load_tokenizer(spec)
    if args.reference is not None and args.reference not in toks:
        raise ValueError(f"--reference {args.reference!r} is not one of the tokenizers: {list(toks)}")
    try:
        server = ViewServer(toks, args.port, args.reference)
    except OSError as exc:
        raise OSError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    print(f"fastbpe view: {server.url} ({', '.join(kit.safe(n) for n in toks)}); Ctrl-C stops it", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("fastbpe view: stopped", file=sys.stderr)
        return 0
    finally:
        server.close()
    return 0  # pragma: no cover
