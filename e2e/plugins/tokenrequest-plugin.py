#!/usr/bin/env python3
"""A client-go exec credential plugin (KEP-541) for Tether's tests that hands out short-lived
tokens the way EKS's or GKE's plugins do: every run asks the member apiserver's TokenRequest
API for a fresh token of PLUGIN_SERVICE_ACCOUNT (<namespace>/<name>), lifetime
PLUGIN_EXPIRATION_SECONDS (default 600, TokenRequest's minimum), and prints it with its
expiry. The rest of the environment and the error contract are in README.md.
"""

import os
import sys

# The shared module must not leave compiled files in the source tree.
sys.dont_write_bytecode = True
import plugin_support as support  # noqa: E402
from plugin_support import PluginError  # noqa: E402


def service_account():
    value = support.required("PLUGIN_SERVICE_ACCOUNT")
    ns, sep, name = value.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise PluginError(f"PLUGIN_SERVICE_ACCOUNT must be <namespace>/<name>, got {value!r}")
    return ns, name


def expiration_seconds():
    raw = os.environ.get("PLUGIN_EXPIRATION_SECONDS", "").strip() or "600"
    try:
        seconds = int(raw)
    except ValueError:
        raise PluginError(f"PLUGIN_EXPIRATION_SECONDS is not an integer: {raw!r}") from None
    if seconds <= 0:
        raise PluginError(f"PLUGIN_EXPIRATION_SECONDS must be positive, got {seconds}")
    return seconds


def main():
    support.count_run()
    api_version = support.exec_info(needed=False).get("apiVersion") or support.DEFAULT_API_VERSION
    server = support.loopback_server()
    ns, name = service_account()
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_seconds()},
    }
    path = support.object_path(ns, "serviceaccounts", name) + "/token"
    response = support.call(server, "POST", path, body)
    status = response.get("status") if isinstance(response, dict) else None
    status = status if isinstance(status, dict) else {}
    token, expiry = status.get("token"), status.get("expirationTimestamp")
    if not token or not expiry:
        raise PluginError(f"TokenRequest for {ns}/{name} returned no token or no expiry")
    support.print_credential(token, api_version, expiry)


if __name__ == "__main__":
    support.run("tokenrequest-plugin", main)
