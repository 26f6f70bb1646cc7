#!/usr/bin/env python3
"""A client-go exec credential plugin (KEP-541) for Tether's tests.

It hands out short-lived tokens the way EKS's or GKE's plugins do: every run asks the member
apiserver's TokenRequest API for a fresh ServiceAccount token and prints it, with its expiry,
as an ExecCredential on stdout.

Environment:
  KUBERNETES_EXEC_INFO       set by the client; its apiVersion is echoed back
                             (default client.authentication.k8s.io/v1)
  PLUGIN_SERVER              the member apiserver, https://127.0.0.1:<port> (loopback only)
  PLUGIN_CA_FILE             PEM bundle that verifies PLUGIN_SERVER
  PLUGIN_ADMIN_TOKEN_FILE    file holding a bearer token allowed to create serviceaccounts/token
  PLUGIN_SERVICE_ACCOUNT     <namespace>/<name> of the ServiceAccount to mint for
  PLUGIN_EXPIRATION_SECONDS  requested lifetime, default 600 (TokenRequest's minimum)
  PLUGIN_COUNT_FILE          optional: one line (a timestamp) is appended per run

On any error: one line on stderr (never a token), nothing on stdout, exit status 1.
Python 3 standard library only.
"""

import json
import os
import sys
import urllib.parse

# The shared module must not leave compiled files in the source tree.
sys.dont_write_bytecode = True
from plugin_support import (  # noqa: E402
    DEFAULT_API_VERSION,
    PluginError,
    call,
    count_run,
    loopback_server,
    print_credential,
    required,
    run,
)



def exec_api_version():
    raw = os.environ.get("KUBERNETES_EXEC_INFO", "").strip()
    if not raw:
        return DEFAULT_API_VERSION
    try:
        info = json.loads(raw)
    except ValueError:
        raise PluginError("KUBERNETES_EXEC_INFO is not JSON") from None
    if not isinstance(info, dict):
        raise PluginError("KUBERNETES_EXEC_INFO is not a JSON object")
    return info.get("apiVersion") or DEFAULT_API_VERSION


def service_account():
    value = required("PLUGIN_SERVICE_ACCOUNT")
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
    count_run()
    api_version = exec_api_version()
    server = loopback_server()
    ns, name = service_account()
    path = "/api/v1/namespaces/{}/serviceaccounts/{}/token".format(
        urllib.parse.quote(ns, safe=""), urllib.parse.quote(name, safe="")
    )
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_seconds()},
    }
    response = call(server, "POST", path, body)
    status = response.get("status") if isinstance(response, dict) else None
    status = status if isinstance(status, dict) else {}
    token, expiry = status.get("token"), status.get("expirationTimestamp")
    if not token or not expiry:
        raise PluginError(f"TokenRequest for {ns}/{name} returned no token or no expiry")
    print_credential(token, api_version, expiry)


if __name__ == "__main__":
    run("tokenrequest-plugin", main)
