#!/usr/bin/env python3
"""Prints a library's public API, one item a line, sorted, from rustdoc's JSON output.

    public_api.py target/doc/member_client.json

Modules, types, traits, functions and methods with their signatures, public fields, variants,
constants and the traits each public type implements (derived or written, not auto or blanket
ones). Enough that a change to what an embedder can name or call is a visible diff of the
snapshot; not a semver checker.
"""
import json
import sys


def render(ty):
    """A type as Rust spells it, near enough to see a change."""
    if ty is None:
        return "()"
    (kind, v), = ty.items()
    if kind == "resolved_path":
        return v["path"] + args(v.get("args"))
    if kind == "primitive":
        return v
    if kind == "generic":
        return v
    if kind == "borrowed_ref":
        mutable = "mut " if v["is_mutable"] else ""
        life = v["lifetime"] + " " if v.get("lifetime") else ""
        return f"&{life}{mutable}{render(v['type'])}"
    if kind == "tuple":
        return "(" + ", ".join(render(t) for t in v) + ")"
    if kind == "slice":
        return f"[{render(v)}]"
    if kind == "array":
        return f"[{render(v['type'])}; {v['len']}]"
    if kind in ("impl_trait", "dyn_trait"):
        bounds = v if kind == "impl_trait" else v["traits"]
        names = []
        for b in bounds:
            if kind == "dyn_trait":
                names.append(b["trait"]["path"] + args(b["trait"].get("args")))
            elif "trait_bound" in b:
                t = b["trait_bound"]["trait"]
                names.append(t["path"] + args(t.get("args")))
        return ("impl " if kind == "impl_trait" else "dyn ") + " + ".join(names)
    if kind == "qualified_path":
        return f"<{render(v['self_type'])}>::{v['name']}"
    if kind == "raw_pointer":
        return ("*mut " if v["is_mutable"] else "*const ") + render(v["type"])
    if kind == "function_pointer":
        return "fn(..)"
    return kind


def args(a):
    if not a or "angle_bracketed" not in a:
        if a and "parenthesized" in a:
            p = a["parenthesized"]
            return "(" + ", ".join(render(t) for t in p["inputs"]) + ") -> " + render(p["output"])
        return ""
    parts = []
    for arg in a["angle_bracketed"]["args"]:
        if "type" in arg:
            parts.append(render(arg["type"]))
        elif "lifetime" in arg:
            parts.append(arg["lifetime"])
        elif "const" in arg:
            parts.append(str(arg["const"].get("expr", "_")))
    for c in a["angle_bracketed"].get("constraints", []):
        binding = c.get("binding", {})
        if "equality" in binding and "type" in binding["equality"]:
            parts.append(f"{c['name']} = {render(binding['equality']['type'])}")
    return "<" + ", ".join(parts) + ">" if parts else ""


def receiver(ty):
    """`self`, `&self` or `&mut self`."""
    ref = ty.get("borrowed_ref") if isinstance(ty, dict) else None
    if ref is None:
        return "self"
    return "&mut self" if ref["is_mutable"] else "&self"


def signature(f):
    sig = f["sig"]
    inputs = ", ".join(receiver(t) if name == "self" else f"{name}: {render(t)}" for name, t in sig["inputs"])
    out = sig.get("output")
    header = f["header"]
    prefix = ("async " if header.get("is_async") else "") + ("const " if header.get("is_const") else "")
    return prefix, f"({inputs})" + (f" -> {render(out)}" if out else "")


def main(path):
    doc = json.load(open(path))
    index = doc["index"]
    lines = set()

    def item(i):
        return index.get(str(i))

    def walk(module_id, prefix, seen):
        if module_id in seen:
            return
        seen.add(module_id)
        for child_id in item(module_id)["inner"]["module"]["items"]:
            child = item(child_id)
            if child is None:
                continue
            name = child.get("name")
            (kind, inner), = child["inner"].items()
            if kind == "use":
                target = item(inner["id"]) if inner.get("id") is not None else None
                if target is None:
                    lines.add(f"pub use {prefix}::{inner['name']} = {inner['source']}")
                elif inner["is_glob"]:
                    if "module" in target["inner"]:
                        walk(inner["id"], prefix, seen)
                else:
                    describe(target, f"{prefix}::{inner['name']}", seen)
                continue
            describe(child, f"{prefix}::{name}", seen)

    def describe(it, path, seen):
        (kind, inner), = it["inner"].items()
        if kind == "module":
            lines.add(f"pub mod {path}")
            walk(it["id"], path, seen)
        elif kind == "function":
            pre, sig = signature(inner)
            lines.add(f"pub {pre}fn {path}{sig}")
        elif kind in ("struct", "enum", "trait", "union"):
            lines.add(f"pub {kind} {path}")
            if kind == "struct":
                fields = inner["kind"].get("plain", {}).get("fields", [])
                tuple_fields = inner["kind"].get("tuple") or []
                for fid in fields + [f for f in tuple_fields if f is not None]:
                    field = item(fid)
                    if field is not None:
                        lines.add(f"pub field {path}::{field['name']}: {render(field['inner']['struct_field'])}")
            if kind == "enum":
                for vid in inner["variants"]:
                    lines.add(f"variant {path}::{item(vid)['name']}")
            if kind == "trait":
                for mid in inner["items"]:
                    m = item(mid)
                    if m and "function" in m["inner"]:
                        _, sig = signature(m["inner"]["function"])
                        lines.add(f"trait fn {path}::{m['name']}{sig}")
            for impl_id in inner.get("impls", []):
                impl = item(impl_id)["inner"]["impl"]
                if impl["is_synthetic"] or impl["blanket_impl"] is not None:
                    continue
                if impl["trait"] is not None:
                    lines.add(f"impl {impl['trait']['path']}{args(impl['trait'].get('args'))} for {path}")
                    continue
                for mid in impl["items"]:
                    m = item(mid)
                    if m is None or m.get("visibility") != "public":
                        continue
                    if "function" in m["inner"]:
                        pre, sig = signature(m["inner"]["function"])
                        lines.add(f"pub {pre}fn {path}::{m['name']}{sig}")
                    elif "assoc_const" in m["inner"]:
                        lines.add(f"pub const {path}::{m['name']}")
        elif kind == "constant":
            lines.add(f"pub const {path}: {render(inner['type'])}")
        elif kind == "static":
            lines.add(f"pub static {path}")
        elif kind == "type_alias":
            lines.add(f"pub type {path} = {render(inner['type'])}")
        elif kind == "macro":
            lines.add(f"pub macro {path}")
        else:
            lines.add(f"pub {kind} {path}")

    root = doc["root"]
    walk(root, item(root)["name"], set())
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main(sys.argv[1])
