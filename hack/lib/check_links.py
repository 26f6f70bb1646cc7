#!/usr/bin/env python3
"""Fails on a broken internal link of the book or of the given Markdown files (README.md).

The book is checked as built (HTML): every relative <a href> of every page must name a file
of the book and, with a #fragment, an id on that page. That is what a reader follows, after
mdbook turned page.md links into page.html, so Markdown's corner cases (code spans,
reference links, HTML) need no parser here. A Markdown file outside the book is checked as
written: a relative link must name a file of the repository, and a #fragment must be a
heading of the target (the built page's ids for a page of the book, GitHub's heading
anchors for any other Markdown file).

Usage: check_links.py --book target/book --src docs/src [FILE.md ...]
"""

import argparse
import html.parser
import os
import re
import sys
import urllib.parse

# Pages mdbook generates beside the chapters: the print page repeats every chapter (and its
# links, rewritten), the 404 page is served from the site root, index.html is a copy of the
# first chapter.
GENERATED = {"print.html", "404.html", "index.html"}


class Page(html.parser.HTMLParser):
    """The ids and the <a href> links of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "a" and attrs.get("href") is not None:
            self.links.append(attrs["href"])


def is_external(href):
    parsed = urllib.parse.urlsplit(href)
    return bool(parsed.scheme) or href.startswith("//")


class Book:
    def __init__(self, root, src):
        self.root = os.path.realpath(root)
        self.src = os.path.realpath(src)
        self.pages = {}

    def page(self, path):
        if path not in self.pages:
            parser = Page()
            with open(path, encoding="utf-8") as f:
                parser.feed(f.read())
            self.pages[path] = parser
        return self.pages[path]

    def source_of(self, html_path):
        """The chapter a built page comes from, for messages."""
        rel = os.path.relpath(html_path, self.root)
        md = os.path.join(self.src, os.path.splitext(rel)[0] + ".md")
        return os.path.relpath(md) if os.path.exists(md) else os.path.relpath(html_path)

    def check_link(self, page_path, href):
        """Why href on page_path is broken; None if it is not."""
        parsed = urllib.parse.urlsplit(href)
        target = page_path  # a fragment alone: this page
        if parsed.path:
            base = os.path.dirname(page_path)
            target = os.path.realpath(os.path.join(base, urllib.parse.unquote(parsed.path)))
            if os.path.commonpath([target, self.root]) != self.root:
                return "leaves the book (link to the repository by its URL instead)"
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.isfile(target):
                return "no such page or file"
        return self.check_fragment(target, parsed.fragment)

    def check_fragment(self, page_path, fragment):
        """Why #fragment names nothing on page_path; None if it does (or is empty)."""
        if not fragment or not page_path.endswith(".html"):
            return None
        if urllib.parse.unquote(fragment) not in self.page(page_path).ids:
            return f"no heading or id #{fragment} on {os.path.relpath(page_path, self.root)}"
        return None

    def check(self):
        broken = []
        for dirpath, _, files in os.walk(self.root):
            for name in sorted(files):
                if not name.endswith(".html") or (dirpath == self.root and name in GENERATED):
                    continue
                path = os.path.join(dirpath, name)
                for href in self.page(path).links:
                    why = None if is_external(href) else self.check_link(path, href)
                    if why:
                        broken.append(f"{self.source_of(path)}: {href}: {why}")
        return broken


FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def unfenced_lines(path):
    """(number, line) of the lines of a Markdown file outside fenced code."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                fence = None if fence == m.group(1) else (fence or m.group(1))
            elif not fence:
                yield number, line


def markdown_links(path):
    """(target, line) of the inline links and reference definitions outside code."""
    links = []
    for number, line in unfenced_lines(path):
        text = re.sub(r"`[^`]*`", "", line)
        links += [(t, number) for t in INLINE_LINK.findall(text) + REFERENCE_DEF.findall(text)]
    return links


def github_anchors(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    anchors, seen = set(), {}
    for _, line in unfenced_lines(path):
        m = HEADING.match(line)
        if m:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text only
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def check_markdown(path, book):
    broken = []
    base = os.path.dirname(os.path.realpath(path))
    for href, line in markdown_links(path):
        if is_external(href):
            continue
        parsed = urllib.parse.urlsplit(href)
        target = os.path.realpath(os.path.join(base, urllib.parse.unquote(parsed.path))) \
            if parsed.path else os.path.realpath(path)
        why = None
        if not os.path.exists(target):
            why = "no such file"
        elif parsed.fragment and target.endswith(".md"):
            if os.path.commonpath([target, book.src]) == book.src:
                built = os.path.join(book.root, os.path.relpath(target, book.src))
                why = book.check_fragment(os.path.splitext(built)[0] + ".html", parsed.fragment)
            elif parsed.fragment not in github_anchors(target):
                why = f"no heading #{parsed.fragment} in {os.path.relpath(target)}"
        if why:
            broken.append(f"{os.path.relpath(path)}:{line}: {href}: {why}")
    return broken


def main():
    args = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    args.add_argument("--book", required=True, help="the built book (book.toml's build-dir)")
    args.add_argument("--src", required=True, help="the book's sources (docs/src)")
    args.add_argument("markdown", nargs="*", help="Markdown files outside the book")
    opts = args.parse_args()
    book = Book(opts.book, opts.src)
    if not os.path.isfile(os.path.join(book.root, "index.html")):
        sys.exit(f"check_links: {opts.book} holds no built book (no index.html)")
    broken = book.check()
    for path in opts.markdown:
        broken += check_markdown(path, book)
    for line in broken:
        print(f"check_links: broken link: {line}", file=sys.stderr)
    if broken:
        sys.exit(f"check_links: {len(broken)} broken internal link(s)")
    print(f"check_links: {len(book.pages)} pages and {len(opts.markdown)} Markdown file(s), "
          "no broken internal link", file=sys.stderr)


if __name__ == "__main__":
    main()
