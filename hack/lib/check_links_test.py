"""check_links.py finds each kind of broken link, and only those (hack/docs.sh runs this)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_links  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class CheckLinks(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.book = os.path.join(self.root, "book")
        self.src = os.path.join(self.root, "docs", "src")
        # A built book: a page with a heading, and the page that links to it.
        write(os.path.join(self.src, "a", "page.md"), "# Page\n")
        write(os.path.join(self.book, "index.html"), "<h1 id='intro'>x</h1>")
        write(os.path.join(self.book, "a", "page.html"), "<h2 id='heading'>x</h2>")

    def broken_in_book(self, links):
        anchors = "".join(f"<a href='{href}'>x</a>" for href in links)
        write(os.path.join(self.book, "a", "from.html"), f"<h1 id='here'>x</h1>{anchors}")
        return check_links.Book(self.book, self.src).check()

    def test_the_book_broken_links_and_only_those(self):
        broken = self.broken_in_book([
            "page.html", "page.html#heading", "#here", "../index.html#intro",
            "https://example.invalid/x", "mailto:a@b",
            "missing.html", "page.html#missing", "#nowhere", "../../outside.md",
        ])
        self.assertEqual(len(broken), 4, broken)
        for href, why in [("missing.html", "no such page"), ("page.html#missing", "#missing"),
                          ("#nowhere", "#nowhere"), ("../../outside.md", "leaves the book")]:
            self.assertTrue(any(f": {href}: " in b and why in b for b in broken), (href, broken))

    def test_markdown_outside_the_book(self):
        readme = os.path.join(self.root, "README.md")
        write(readme, "# Tether\n## Install it\n"
              "[ok](docs/src/a/page.md#heading) [ok](#install-it) [ok](https://x.invalid)\n"
              "`[code](nope.md)`\n```\n[fenced](nope.md)\n```\n"
              "[gone](docs/src/a/gone.md) [anchor](docs/src/a/page.md#missing) [self](#nope)\n")
        broken = check_links.check_markdown(readme, check_links.Book(self.book, self.src))
        self.assertEqual(len(broken), 3, broken)
        self.assertTrue(all("README.md:8: " in b for b in broken), broken)


if __name__ == "__main__":
    unittest.main()
