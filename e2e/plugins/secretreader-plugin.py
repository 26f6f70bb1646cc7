#!/usr/bin/env python3
"""A client-go exec credential plugin (KEP-541) for Tether's tests, after SIG-Multicluster's
reference `secretreader` provider (KEP-5339, sigs.k8s.io/cluster-inventory-api).

It reads `clusterName` from `spec.cluster.config` of KUBERNETES_EXEC_INFO (the client must set
provideClusterInfo), GETs the Secret <PLUGIN_SECRET_NAMESPACE>/<clusterName> from the control
plane, and prints its base64-decoded `token` key as an ExecCredential with no
expirationTimestamp (the client may cache it until a 401).

Environment:
  KUBERNETES_EXEC_INFO       set by the client; required; its apiVersion is echoed back
                             (default client.authentication.k8s.io/v1)
  PLUGIN_SERVER              the control plane, https://127.0.0.1:<port> (loopback only)
  PLUGIN_CA_FILE             PEM bundle that verifies PLUGIN_SERVER
  PLUGIN_ADMIN_TOKEN_FILE    file holding a bearer token allowed to get the Secret
  PLUGIN_SECRET_NAMESPACE    namespace of the per-cluster Secrets
  PLUGIN_COUNT_FILE          optional: one line (a timestamp) is appended per run

On any error: one line on stderr (never a token), nothing on stdout, exit status 1.
Python 3 standard library only.
"""

import base64
import binascii
import json
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

SECRET_TOKEN_KEY = "token"


def exec_info():
    try:
        info = json.loads(required("KUBERNETES_EXEC_INFO"))
    except ValueError:
        raise PluginError("KUBERNETES_EXEC_INFO is not JSON") from None
    if not isinstance(info, dict):
        raise PluginError("KUBERNETES_EXEC_INFO is not a JSON object")
    return info


def cluster_name(info):
    spec = info.get("spec")
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    config = cluster.get("config") if isinstance(cluster, dict) else None
    if not isinstance(config, dict):
        raise PluginError("missing ExecCredential.spec.cluster.config (set provideClusterInfo)")
    name = config.get("clusterName")
    if not isinstance(name, str) or not name:
        raise PluginError("missing clusterName in ExecCredential.spec.cluster.config")
    return name


def main():
    count_run()
    info = exec_info()
    api_version = info.get("apiVersion") or DEFAULT_API_VERSION
    name = cluster_name(info)
    ns = required("PLUGIN_SECRET_NAMESPACE")
    server = loopback_server()
    path = "/api/v1/namespaces/{}/secrets/{}".format(
        urllib.parse.quote(ns, safe=""), urllib.parse.quote(name, safe="")
    )
    secret = call(server, "GET", path)
    data = secret.get("data") if isinstance(secret, dict) else None
    encoded = data.get(SECRET_TOKEN_KEY) if isinstance(data, dict) else None
    if not encoded:
        raise PluginError(f"secret {ns}/{name} missing {SECRET_TOKEN_KEY!r} key")
    try:
        token = base64.b64decode(encoded, validate=True).decode("utf-8").strip()
    except (binascii.Error, ValueError):
        raise PluginError(f"secret {ns}/{name} key {SECRET_TOKEN_KEY!r} is not a UTF-8 token") from None
    if not token:
        raise PluginError(f"secret {ns}/{name} key {SECRET_TOKEN_KEY!r} is empty")
    print_credential(token, api_version)


if __name__ == "__main__":
    run("secretreader-plugin", main)
