#!/usr/bin/env python3
"""A client-go exec credential plugin (KEP-541) for Tether's tests: it prints the content of
the file named by its last argument as the ExecCredential's token.

It stands for any plugin that reads a file its caller names (a cloud CLI's `--profile`,
`--credentials-file`, a token helper): whoever chooses its arguments chooses what it reads
and hands out. The security tests use it to show that a member definition cannot choose them.

On any error: one line on stderr (never a token), nothing on stdout, exit status 1.
Python 3 standard library only.
"""

import sys

# The shared module must not leave compiled files in the source tree.
sys.dont_write_bytecode = True
from plugin_support import print_credential  # noqa: E402


def main():
    if len(sys.argv) < 2:
        raise OSError("no token file argument")
    with open(sys.argv[-1], encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise OSError("the token file is empty")
    print_credential(token)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(f"tokenfile-plugin: cannot read the token file: {e.strerror or e}", file=sys.stderr)
        sys.exit(1)
