#!/usr/bin/env python3
"""A client-go exec credential plugin (KEP-541) for Tether's tests, after SIG-Multicluster's
reference `secretreader` provider (KEP-5339, sigs.k8s.io/cluster-inventory-api): it prints
the `token` key of Secret <PLUGIN_SECRET_NAMESPACE>/<clusterName> on the control plane, with
`clusterName` from `spec.cluster.config` of KUBERNETES_EXEC_INFO (the client must set
provideClusterInfo). The environment and the error contract are in README.md.
"""

import base64
import binascii
import sys

# The shared module must not leave compiled files in the source tree.
sys.dont_write_bytecode = True
import plugin_support as support  # noqa: E402
from plugin_support import PluginError  # noqa: E402

SECRET_TOKEN_KEY = "token"


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
    support.count_run()
    info = support.exec_info(needed=True)
    name = cluster_name(info)
    ns = support.required("PLUGIN_SECRET_NAMESPACE")
    server = support.loopback_server()
    secret = support.call(server, "GET", support.object_path(ns, "secrets", name))
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
    support.print_credential(token, info.get("apiVersion") or support.DEFAULT_API_VERSION)


if __name__ == "__main__":
    support.run("secretreader-plugin", main)
