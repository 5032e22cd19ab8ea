"""What the in-memory API server does to objects' data, as the API server does it: apply-like merge, JSON merge
patch (RFC 7386), JSON patch (RFC 6902), label and field selectors."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from kai_conformance.fixtures import errors

Obj = dict[str, Any]


def deep_merge(base: Any, overlay: Any) -> Any:
    """Apply-like merge: dicts merge recursively, everything else (lists included) is replaced."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = dict(base)
        for key, value in overlay.items():
            out[key] = deep_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(overlay)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(target: Obj, ops: list[Obj]) -> Obj:
    """RFC 6902 add/replace/remove, with ``~1`` for ``/`` and ``~0`` for ``~`` in path segments."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                if op["op"] == "replace" and last not in parent:
                    raise errors.Invalid("json patch", 422, "Invalid", f"replace of missing {op['path']}")
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif parent.pop(last, None) is None:
                raise errors.Invalid("json patch", 422, "Invalid", f"remove of missing {op['path']}")
        else:
            raise errors.Invalid("json patch", 422, "Invalid", f"unsupported op {op['op']}")
    return doc


_REQUIREMENT = re.compile(
    r"^\s*(?P<neg>!)?(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[A-Za-z0-9_.\-/:]*))?\s*$"
)


def _split(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current] if current.strip() else parts


def parse_selector(selector: str | None) -> Callable[[dict[str, str]], bool]:
    """Kubernetes label-selector syntax: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``."""
    if not selector:
        return lambda values: True
    checks = []
    for requirement in _split(selector):
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise errors.Invalid("selector", 400, "BadRequest", f"unable to parse requirement {requirement!r}")
        checks.append(_requirement(match["key"], (match["op"] or "").strip(), match["value"], bool(match["neg"])))
    return lambda values: all(check(values) for check in checks)


def _requirement(key: str, op: str, value: str | None, negated: bool) -> Callable[[dict[str, str]], bool]:
    if not op:
        return lambda values: (key in values) != negated
    if op in ("=", "=="):
        return lambda values: values.get(key) == value
    if op == "!=":
        return lambda values: values.get(key) != value
    options = {o.strip() for o in (value or "").strip("()").split(",")}
    if op == "in":
        return lambda values: values.get(key) in options
    return lambda values: values.get(key) not in options


def field_values(obj: Obj) -> dict[str, str]:
    """The field-selector keys the API server supports for the kinds the suite lists."""
    meta = obj.get("metadata", {})
    values = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
    if obj.get("kind") == "Event":
        for key, value in (obj.get("involvedObject") or {}).items():
            values[f"involvedObject.{key}"] = str(value)
        values["reason"] = obj.get("reason", "")
    if obj.get("kind") == "Pod":
        values["spec.nodeName"] = obj.get("spec", {}).get("nodeName", "") or ""
        values["status.phase"] = obj.get("status", {}).get("phase", "")
    return values
