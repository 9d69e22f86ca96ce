"""The fenced code blocks of a Markdown page, and what each of them is for.

A page's blocks are read in order. What a block is for comes from its info string
and from an HTML comment on the line before it:

- ``python``: code, run in one namespace per page, in order; ``pycon``: a
  session (``>>>`` lines and what they print), run in the same namespace as a
  doctest (``...`` in its output stands for anything);
- ``sh``, ``bash``: command lines (a ``\\`` continues a line; ``#`` starts a comment),
  each run by bash; a comment line right after a command shows part of that
  command's output (stdout and stderr) and is compared with it;
- ``toml`` or any block after ``<!-- file: NAME -->``: a file the reader saves as
  ``NAME`` before the blocks that follow (a toml block without the comment is an
  example of the format, not run);
- a block with no info string, ``text``, ``json`` or ``output`` right after a
  block that runs: the output of that block, compared with the run;
- any block after ``<!-- not run: WHY -->``: shown only (a real cluster, a real
  Prometheus server); its addresses are checked instead;
- MyST directives (``{toctree}``, ``{include}``) and examples of a layout or a
  format without a run before them are not code.

Output is compared by :func:`shows`: token by token, whitespace aside, ``...``
(or ``"..."`` in JSON) standing for anything, and a number shown matching the
run's number rounded as far as the page rounds it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

#: Info strings of blocks that run.
RUNS = {"python": "python", "pycon": "pycon", "sh": "shell", "bash": "shell", "console": "shell"}
#: Info strings of blocks that show the output of the block before them.
OUTPUTS = {"", "text", "json", "output"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r'"\.\.\."|\.\.\.|…|' + _NUMBER.pattern + r"|[^\W\d]+|[^\w\s]")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page.

    Attributes:
        page: the Markdown file.
        line: the 1-based line of its opening fence.
        info: the first word of its info string, lower case ("" for none).
        text: what the fences enclose.
        note: the HTML comment on the line before the fence, without ``<!--``/``-->``
            ("" for none): ``not run: WHY`` or ``file: NAME``.
        kind: ``python``, ``pycon``, ``shell``, ``file``, ``output``, ``not run`` or ``shown``
            (an example of a format or a layout, or a MyST directive).
    """

    page: Path
    line: int
    info: str
    text: str
    note: str
    kind: str

    @property
    def where(self) -> str:
        """``docs/guide/chains.md:8``, relative to the page's repository."""
        parts = self.page.parts
        start = max((i for i, p in enumerate(parts) if p in {"docs", "README.md"}), default=0)
        return f"{Path(*parts[start:])}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The name a ``file:`` block is saved as, else None."""
        if self.note.startswith("file:"):
            return self.note.removeprefix("file:").strip()
        return None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` in order, each with what it is for.

    Raises:
        ValueError: a fence is never closed (names the page and the line).
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    previous_runs = False  # whether the last block before this one runs
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            if lines[i].strip() and not _COMMENT.match(lines[i]):
                previous_runs = False  # prose between: the next block is not its output
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip() == fence[0] * len(lines[j].strip())
                and len(lines[j].strip()) >= len(fence)
            ),
            None,
        )
        if closing is None:
            raise ValueError(f"{page}:{i + 1}: a code block that is never closed")
        info = opening["info"].strip().split(" ", 1)[0].lower()
        comment = _COMMENT.match(lines[i - 1]) if i else None
        note = comment["body"] if comment else ""
        text = "\n".join(line[indent:] for line in lines[i + 1 : closing])
        if note.startswith("not run:"):
            kind = "not run"
        elif note.startswith("file:"):
            kind = "file"
        elif info in RUNS:
            kind = RUNS[info]
        elif info in OUTPUTS and previous_runs:
            kind = "output"
        else:
            kind = "shown"
        found.append(Block(page, i + 1, info, text + "\n", note, kind))
        previous_runs = kind in {"python", "shell"}  # a pycon block shows its own output
        i = closing + 1
    return found


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """A shell block's command lines, each with the comment lines that follow it.

    Returns:
        ``(command, shown)`` pairs: the command with its continuations joined, and
        the comment lines right after it (their ``# `` removed), the output it shows.
        A comment on a command's own line, before any command or after a blank line
        says what the command does.
    """
    found: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    shown_after = False  # whether comment lines now show the last command's output
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if not line:
            shown_after = False
            continue
        if line.lstrip().startswith("#"):
            if shown_after:
                found[-1][1].append(line.lstrip()[1:].strip())
            continue
        pending.append(line.removesuffix("\\").rstrip() if line.endswith("\\") else line)
        if not line.endswith("\\"):
            command = " ".join(part.strip() for part in pending)
            # a comment on the command's own line says what it does
            found.append((_split_comment(command)[0], []))
            pending = []
            shown_after = True
    return found


def _split_comment(command: str) -> tuple[str, str, str]:
    """``command  # note`` -> (command, "#", note), outside quotes."""
    quote = ""
    for index, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            return command[:index].rstrip(), "#", command[index + 1 :].strip()
    return command, "", ""


def _tokens(text: str) -> list[str]:
    # a quoted "..." keeps an abridged JSON block valid JSON, and is a gap like ...
    return ["..." if token == '"..."' else token for token in _TOKEN.findall(text)]


def _number(token: str) -> float | None:
    if not _NUMBER.fullmatch(token) or not any(c.isdigit() for c in token):
        return None
    return float(token.replace(",", ""))


def _rounds_to(shown: str, actual: str) -> bool:
    """Whether the run's number ``actual`` is ``shown`` as far as ``shown`` is written.

    ``0.45`` is 0.4498 and 0.4502; ``3.5e+04`` is 35,021; ``999`` is 998.93;
    ``4,880`` is 4,880 exactly.
    """
    a, s = _number(actual), _number(shown)
    if a is None or s is None:
        return False
    if a == s:
        return True
    mantissa = shown.lower().replace(",", "").lstrip("+-").split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(shown.lower().split("e")[1]) if "e" in shown.lower() else 0
    step = 10.0 ** (exponent - decimals)
    # half a unit in the last place shown, and a hair more for the float's own error
    return math.isclose(abs(a - s), 0, abs_tol=step / 2 * (1 + 1e-9))


def shows(shown: str, actual: str) -> bool:
    """Whether ``actual`` (a run's output) reads as ``shown`` (a page's copy of it).

    Whitespace aside, every token of ``shown`` appears in ``actual`` in order and
    contiguously, except where ``shown`` has ``...`` (anything, or nothing); the copy
    may start and end anywhere in the output. A number matches the run's number
    rounded to the digits shown.
    """
    want = _tokens(shown)
    have = _tokens(actual)
    # glob matching with '...' as '*', and an implicit '*' at both ends
    pattern = ["...", *want, "..."]
    p = h = 0
    star_p, star_h = -1, 0
    while h < len(have):
        if p < len(pattern) and pattern[p] in {"...", "…"}:
            star_p, star_h = p, h
            p += 1
        elif p < len(pattern) and _same(pattern[p], have[h]):
            p += 1
            h += 1
        elif star_p >= 0:
            p = star_p + 1
            star_h += 1
            h = star_h
        else:
            return False
    while p < len(pattern) and pattern[p] in {"...", "…"}:
        p += 1
    return p == len(pattern)


def _same(shown: str, actual: str) -> bool:
    if shown == actual:
        return True
    if _number(shown) is not None:
        return _rounds_to(shown, actual)
    return False


def first_difference(shown: str, actual: str) -> str:
    """A line of ``shown`` that ``actual`` does not show on its own, for a failure message."""
    for line in shown.splitlines():
        if line.strip() and not shows(line.replace("...", " ... "), actual):
            return line
    return "(each line matches alone; their order or adjacency differs)"
