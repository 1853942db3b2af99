"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a strategic-merge subset.

Strategic merge patch, as implemented here (see ``docs/emulator.md``):

* maps merge recursively, ``null`` deletes a key (as in a merge patch);
* lists of objects whose field has a known merge key (``containers``/``env``/``volumes``… by
  ``name``, ``conditions`` by ``type``, ``ownerReferences`` by ``uid``, ``ports`` by
  ``containerPort``, ``volumeMounts`` by ``mountPath``…) merge element-wise by that key; an element
  ``{"$patch": "delete", <key>: …}`` deletes one;
* ``finalizers`` (a primitive list with strategy merge) is a set union;
* ``{"$patch": "replace"}`` inside a map replaces the map; ``$retainKeys``, ``$setElementOrder/…``
  and ``$deleteFromPrimitiveList/…`` directives are accepted — the first two are ignored (order is
  the patch's, then the rest), the last one removes the listed values;
* every other list is replaced wholesale.
"""

from __future__ import annotations

from typing import Any

from extender.emulator import errors
from extender.emulator.meta import deep_copy

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_patch",
    "apply_strategic_merge_patch",
]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


class PatchError(Exception):
    """A patch that cannot be applied; :attr:`code` is 400 (malformed) or 422 (failed test/path)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code

    def to_api_error(self) -> errors.ApiError:
        if self.code == 422:
            return errors.ApiError(422, "Invalid", self.args[0])
        return errors.bad_request(self.args[0])


def apply_patch(patch_type: str, target: Any, patch: Any) -> Any:
    """Return ``target`` patched by ``patch`` of media type ``patch_type`` (one of
    :data:`PATCH_TYPES`); a patch that cannot be applied raises the ``ApiError`` to answer."""
    try:
        if patch_type == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise PatchError(400, "merge patch: the body must be a JSON object")
            return apply_merge_patch(target, patch)
        if patch_type == JSON_PATCH:
            return apply_json_patch(target, patch)
        return apply_strategic_merge_patch(target, patch)
    except PatchError as exc:
        raise exc.to_api_error() from None


# ----------------------------------------------------------------------------------------------
# RFC 7386


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` patched by ``patch`` (neither is modified)."""
    if not isinstance(patch, dict):
        return deep_copy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# ----------------------------------------------------------------------------------------------
# RFC 6902


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(400, f"JSON patch: path must be a string, got {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(400, f"JSON patch: path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(422, f"JSON patch: path {path!r}: {part!r} does not exist")
            cur = cur[part]
        elif isinstance(cur, list):
            cur = cur[_index(cur, part, path, allow_end=False)]
        else:
            raise PatchError(422, f"JSON patch: path {path!r}: cannot descend into a scalar")
    return cur


def _index(lst: list[Any], part: str, path: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(lst)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise PatchError(422, f"JSON patch: path {path!r}: invalid array index {part!r}")
    idx = int(part)
    if idx > len(lst) or (idx == len(lst) and not allow_end):
        raise PatchError(422, f"JSON patch: path {path!r}: index {idx} out of bounds")
    return idx


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _container(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, f"JSON patch: path {path!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchError(422, f"JSON patch: path {path!r}: parent is a scalar")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _container(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(422, f"JSON patch: path {path!r}: parent is a scalar")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchError(422, "JSON patch: cannot remove the whole document")
    parent = _container(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, f"JSON patch: cannot remove {path!r}: it does not exist")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, allow_end=False)]
    else:
        raise PatchError(422, f"JSON patch: path {path!r}: parent is a scalar")
    return doc


def apply_json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 operation list to a copy of ``target``."""
    if not isinstance(ops, list):
        raise PatchError(400, "JSON patch: the body must be a JSON array of operations")
    doc = deep_copy(target)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError(400, f"JSON patch: operation {n} must be an object with an 'op'")
        kind = op["op"]
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError(400, f"JSON patch: operation {n} needs a string 'path'")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(400, f"JSON patch: operation {n} ({kind}) needs a 'value'")
        if kind == "add":
            doc = _add(doc, path, deep_copy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            parts = _pointer(path)
            if not parts:
                doc = deep_copy(op["value"])
            else:
                parent = _container(doc, parts, path)
                if isinstance(parent, list):
                    parent[_index(parent, parts[-1], path, allow_end=False)] = deep_copy(op["value"])
                else:
                    parent[parts[-1]] = deep_copy(op["value"])
        elif kind in ("move", "copy"):
            src = op.get("from")
            if not isinstance(src, str):
                raise PatchError(400, f"JSON patch: operation {n} ({kind}) needs a 'from'")
            value = deep_copy(_get(doc, src))
            if kind == "move":
                if path != src and path.startswith(src + "/"):
                    raise PatchError(422, f"JSON patch: cannot move {src!r} into its own child {path!r}")
                doc = _remove(doc, src)
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(422, f"JSON patch: test operation failed: value at {path!r} is not {op['value']!r}")
        else:
            raise PatchError(400, f"JSON patch: unknown operation {kind!r}")
    return doc


# ----------------------------------------------------------------------------------------------
# strategic merge patch (subset)

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "addresses": "type",
}
_MERGE_PRIMITIVE_LISTS = frozenset({"finalizers"})


def apply_strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError(400, "strategic merge patch: the body must be a JSON object")
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: deep_copy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive == "delete":
        return {}
    if directive is not None:
        raise PatchError(400, f"strategic merge patch: unknown $patch directive {directive!r}")
    result = dict(target)
    for key, value in patch.items():
        if key.startswith(("$setElementOrder/", "$retainKeys")):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith("$"):
            raise PatchError(400, f"strategic merge patch: unsupported directive {key!r}")
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            cur = result.get(key)
            result[key] = _smp_map(cur if isinstance(cur, dict) else {}, value)
        elif isinstance(value, list):
            result[key] = _smp_list(key, result.get(key), value)
        else:
            result[key] = value
    return result


def _smp_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if field in _MERGE_PRIMITIVE_LISTS and isinstance(current, list):
        out = list(current)
        out.extend(v for v in patch if v not in out)
        return out
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not isinstance(current, list) or not all(isinstance(p, dict) for p in patch):
        return [_strip_directives(deep_copy(v)) for v in patch]
    if any(p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(deep_copy(p)) for p in patch if p.get("$patch") != "replace"]
    out = list(current)
    for element in patch:
        if merge_key not in element:
            raise PatchError(400, f"strategic merge patch: an element of {field!r} has no merge key {merge_key!r}")
        at = next(
            (i for i, e in enumerate(out) if isinstance(e, dict) and e.get(merge_key) == element[merge_key]), None
        )
        if element.get("$patch") == "delete":
            if at is not None:
                del out[at]
            continue
        if at is None:
            out.append(_strip_directives(deep_copy(element)))
        else:
            out[at] = _smp_map(out[at], element)
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
