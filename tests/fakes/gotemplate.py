"""Go text/template, the part kwok's Stage templates need, so the fake kwok renders a Stage's own template.

kwok renders ``statusTemplate`` with Go's text/template over the object decoded from JSON, with sprig's functions
and its own ``Now``/``Quote`` (kwok v0.8.0 pkg/utils/gotpl). This covers what the suite's stages and the release's
pod stages use: text, ``{{ pipeline }}``, ``{{ $v := pipeline }}`` and ``{{ $v = pipeline }}`` (assignment reaches
the enclosing scope, as in Go since 1.11), ``range``, ``if``/``else``, ``{{-``/``-}}``, ``$`` and ``$v.field``,
``.field.chain`` (a missing key is nil, printed ``<no value>``), parenthesized pipelines, string/number/bool
literals, and the functions in :data:`FUNCS`. Anything else raises :class:`TemplateError`, so a template the fake
cannot render fails the test instead of rendering wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class TemplateError(AssertionError):
    pass


def _truth(value: Any) -> bool:
    """Go's ``truth``: false, 0, nil and empty strings, slices and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, (str, list, dict)):
        return len(value) > 0
    return True


def _quote(value: Any) -> str:
    data = json.dumps(value)
    return data if data.startswith('"') else json.dumps(data)


def _int(value: Any) -> int:
    """sprig's toInt64 (cast.ToInt64E with errors dropped), for what JSON gives."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            return 0
    return 0


def _atoi(value: Any) -> int:
    if not isinstance(value, str):
        raise TemplateError(f"atoi: invalid value; expected string, got {value!r}")
    try:
        return int(value, 10)
    except ValueError:
        return 0


def _eq(first: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("eq: missing argument for comparison")
    for other in others:
        if isinstance(first, bool) != isinstance(other, bool) or isinstance(first, str) != isinstance(other, str):
            raise TemplateError(f"eq: incompatible types for comparison: {first!r}, {other!r}")
        if first == other:
            return True
    return False


def _set(mapping: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    mapping[key] = value
    return mapping


def _get(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key, "")


def _default(default: Any, *given: Any) -> Any:
    return given[0] if given and _truth(given[0]) else default


#: The functions a template may call: Go's builtins used here, sprig's, kwok's. ``Now`` is the caller's.
FUNCS: dict[str, Callable[..., Any]] = {
    "Quote": _quote,
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "not": lambda value: not _truth(value),
    "dict": lambda *pairs: dict(zip(pairs[::2], pairs[1::2], strict=True)),
    "set": _set,
    "get": _get,
    "hasKey": lambda mapping, key: key in mapping,
    "atoi": _atoi,
    "mod": lambda a, b: _int(a) % _int(b) if _int(a) >= 0 else -(-_int(a) % _int(b)),
    "add": lambda *values: sum(_int(v) for v in values),
    "default": _default,
}
#: ``and``/``or`` evaluate their arguments lazily (Go 1.18+): they are not in FUNCS.
_LAZY = ("and", "or")

_ACTION = re.compile(r"\{\{(-\s)?\s*(.*?)\s*(\s-)?\}\}", re.S)
_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<number>-?\d+)|(?P<open>\()|(?P<close>\))|(?P<pipe>\|)'
    r"|(?P<field>(?:\$[A-Za-z_]\w*|\$)?(?:\.[A-Za-z_]\w*)+|\.)|(?P<variable>\$[A-Za-z_]\w*|\$)"
    r"|(?P<word>[A-Za-z_]\w*))"
)


@dataclass
class _Node:
    kind: str  # text | output | define | assign | range | if
    text: str = ""
    name: str = ""
    pipeline: str = ""
    body: list[_Node] = field(default_factory=list)
    otherwise: list[_Node] = field(default_factory=list)


def _parse(template: str) -> list[_Node]:
    root: list[_Node] = []
    stack: list[tuple[_Node | None, list[_Node]]] = [(None, root)]
    position = 0
    pieces: list[tuple[str, str]] = []
    for match in _ACTION.finditer(template):
        text = template[position : match.start()]
        if match.group(1):
            text = text.rstrip()
        if pieces and pieces[-1][0] == "trim-next":
            pieces.pop()
            text = text.lstrip()
        pieces.append(("text", text))
        pieces.append(("action", match.group(2)))
        if match.group(3):
            pieces.append(("trim-next", ""))
        position = match.end()
    tail = template[position:]
    if pieces and pieces[-1][0] == "trim-next":
        pieces.pop()
        tail = tail.lstrip()
    pieces.append(("text", tail))
    for kind, value in pieces:
        body = stack[-1][1]
        if kind == "text":
            if value:
                body.append(_Node("text", text=value))
            continue
        head = value.split(None, 1)
        word, rest = (head[0], head[1] if len(head) > 1 else "") if head else ("", "")
        if word in ("range", "if"):
            node = _Node(word, pipeline=rest)
            body.append(node)
            stack.append((node, node.body))
        elif word == "else" and not rest:
            owner = stack[-1][0]
            if owner is None:
                raise TemplateError("else outside range or if")
            stack[-1] = (owner, owner.otherwise)
        elif word == "end" and not rest:
            if len(stack) == 1:
                raise TemplateError("unexpected end")
            stack.pop()
        elif word in ("else", "with", "template", "define", "block", "break", "continue") or word.startswith("/*"):
            raise TemplateError(f"the fake's Go template does not know {{{{ {value} }}}}")
        elif (assignment := re.fullmatch(r"(\$\w+)\s*(:?=)\s*(.+)", value, re.S)) is not None:
            kind_ = "define" if assignment.group(2) == ":=" else "assign"
            body.append(_Node(kind_, name=assignment.group(1), pipeline=assignment.group(3)))
        else:
            body.append(_Node("output", pipeline=value))
    if len(stack) != 1:
        raise TemplateError("missing end")
    return root


class _Scope:
    def __init__(self, root: Any, funcs: dict[str, Callable[..., Any]]) -> None:
        self.frames: list[dict[str, Any]] = [{"$": root}]
        self.funcs = funcs

    def lookup(self, name: str) -> Any:
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        raise TemplateError(f"undefined variable {name}")

    def assign(self, name: str, value: Any) -> None:
        for frame in reversed(self.frames):
            if name in frame:
                frame[name] = value
                return
        raise TemplateError(f"undefined variable {name}")


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise TemplateError(f"cannot read {text[position:]!r}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


def _field(value: Any, chain: str) -> Any:
    for part in chain.split(".")[1:]:
        if not part:
            continue
        if value is None:
            return None
        if not isinstance(value, dict):
            raise TemplateError(f"can't evaluate field {part} in {type(value).__name__}")
        value = value.get(part)
    return value


class _Evaluator:
    def __init__(self, scope: _Scope) -> None:
        self.scope = scope

    def pipeline(self, text: str, dot: Any) -> Any:
        return self._pipeline(_tokens(text), dot)

    def _pipeline(self, tokens: list[tuple[str, str]], dot: Any) -> Any:
        commands: list[list[tuple[str, str]]] = [[]]
        depth = 0
        for token in tokens:
            if token[0] == "pipe" and depth == 0:
                commands.append([])
                continue
            depth += {"open": 1, "close": -1}.get(token[0], 0)
            commands[-1].append(token)
        value: Any = None
        for number, command in enumerate(commands):
            value = self._command(command, dot, piped=(value,) if number else ())
        return value

    def _command(self, tokens: list[tuple[str, str]], dot: Any, piped: tuple[Any, ...]) -> Any:
        if not tokens:
            raise TemplateError("empty command")
        kind, text = tokens[0]
        if kind == "word" and text not in ("true", "false", "nil"):
            args = self._operands(tokens[1:], dot)
            if text in _LAZY:
                values = [*args, *((lambda v=v: v) for v in piped)]
                result: Any = None
                for get in values:
                    result = get()
                    if _truth(result) != (text == "and"):
                        return result
                return result
            func = self.scope.funcs.get(text)
            if func is None:
                raise TemplateError(f'function "{text}" not defined in the fake')
            return func(*(get() for get in args), *piped)
        operands = self._operands(tokens, dot)
        if len(operands) != 1 or piped:
            raise TemplateError(f"can't give argument to non-function {text}")
        return operands[0]()

    def _operands(self, tokens: list[tuple[str, str]], dot: Any) -> list[Callable[[], Any]]:
        """Each operand as a thunk, so ``and``/``or`` evaluate only what they need."""
        operands: list[Callable[[], Any]] = []
        index = 0
        while index < len(tokens):
            kind, text = tokens[index]
            if kind == "open":
                depth, end = 1, index + 1
                while depth:
                    depth += {"open": 1, "close": -1}.get(tokens[end][0], 0)
                    end += 1
                inner = tokens[index + 1 : end - 1]
                operands.append(lambda inner=inner: self._pipeline(inner, dot))
                index = end
                continue
            operands.append(self._operand(kind, text, dot))
            index += 1
        return operands

    def _operand(self, kind: str, text: str, dot: Any) -> Callable[[], Any]:
        if kind == "string":
            return lambda: json.loads(text)
        if kind == "number":
            return lambda: int(text)
        if kind == "word" and text in ("true", "false", "nil"):
            return lambda: {"true": True, "false": False, "nil": None}[text]
        if kind == "variable":
            return lambda: self.scope.lookup(text)
        if kind == "field":
            if text.startswith("$"):
                name, _, chain = text.partition(".")
                return lambda: _field(self.scope.lookup(name), "." + chain)
            return lambda: dot if text == "." else _field(dot, text)
        if kind == "word" and text in self.scope.funcs:
            return self.scope.funcs[text]  # a niladic function named as an argument is called
        raise TemplateError(f"unexpected {text!r}")


def _show(value: Any) -> str:
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise TemplateError(f"the fake does not print {type(value).__name__} values")
    return str(value)


def _run(nodes: list[_Node], dot: Any, scope: _Scope, out: list[str]) -> None:
    evaluator = _Evaluator(scope)
    for node in nodes:
        if node.kind == "text":
            out.append(node.text)
        elif node.kind == "output":
            out.append(_show(evaluator.pipeline(node.pipeline, dot)))
        elif node.kind == "define":
            scope.frames[-1][node.name] = evaluator.pipeline(node.pipeline, dot)
        elif node.kind == "assign":
            scope.assign(node.name, evaluator.pipeline(node.pipeline, dot))
        elif node.kind == "if":
            scope.frames.append({})
            branch = node.body if _truth(evaluator.pipeline(node.pipeline, dot)) else node.otherwise
            _run(branch, dot, scope, out)
            scope.frames.pop()
        elif node.kind == "range":
            items = evaluator.pipeline(node.pipeline, dot)
            if isinstance(items, dict):
                items = [items[k] for k in sorted(items)]
            if items is not None and not isinstance(items, list):
                raise TemplateError(f"range can't iterate over {items!r}")
            if not items:
                scope.frames.append({})
                _run(node.otherwise, dot, scope, out)
                scope.frames.pop()
            for item in items or []:
                scope.frames.append({})
                _run(node.body, item, scope, out)
                scope.frames.pop()


def render(template: str, data: Any, funcs: dict[str, Callable[..., Any]] | None = None) -> str:
    """``template`` executed over ``data`` as kwok's renderer does (it trims the template's surrounding space)."""
    scope = _Scope(data, {**FUNCS, **(funcs or {})})
    out: list[str] = []
    _run(_parse(template.strip()), data, scope, out)
    return "".join(out)
