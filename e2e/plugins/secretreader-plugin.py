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
import datetime
import ipaddress
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_API_VERSION = "client.authentication.k8s.io/v1"
TIMEOUT_SECONDS = 10
SECRET_TOKEN_KEY = "token"


class PluginError(Exception):
    """A failure worth one line on stderr."""


def count_run():
    path = os.environ.get("PLUGIN_COUNT_FILE")
    if path:
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat()
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(stamp + "\n")
        except OSError as e:
            raise PluginError(f"cannot append to PLUGIN_COUNT_FILE: {e.strerror}") from None


def required(name):
    value = os.environ.get(name, "").strip()
    if not value:
        raise PluginError(f"{name} is not set")
    return value


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


def loopback_server():
    server = required("PLUGIN_SERVER").rstrip("/")
    url = urllib.parse.urlsplit(server)
    try:
        loopback = url.hostname is not None and ipaddress.ip_address(url.hostname).is_loopback
    except ValueError:
        loopback = False
    if url.scheme != "https" or not loopback or url.path or url.query:
        raise PluginError(f"PLUGIN_SERVER must be https://<loopback IP>:<port>, got {server!r}")
    return server


def read_token_file(name):
    path = required(name)
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise PluginError(f"cannot read {name}: {e.strerror}") from None
    if not token:
        raise PluginError(f"{name} is empty")
    return token


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: the plugin talks to PLUGIN_SERVER and nothing else."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def get(server, path):
    """One GET to the apiserver; returns the decoded response object."""
    try:
        context = ssl.create_default_context(cafile=required("PLUGIN_CA_FILE"))
    except (OSError, ssl.SSLError) as e:
        raise PluginError(f"cannot load PLUGIN_CA_FILE: {e}") from None
    # An empty ProxyHandler: HTTPS_PROXY and friends must not send this anywhere else.
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=context),
        NoRedirect(),
    )
    request = urllib.request.Request(server + path, method="GET")
    request.add_header("Authorization", "Bearer " + read_token_file("PLUGIN_ADMIN_TOKEN_FILE"))
    request.add_header("Accept", "application/json")
    try:
        with opener.open(request, timeout=TIMEOUT_SECONDS) as response:
            payload = response.read()
    except urllib.error.HTTPError as e:
        raise PluginError(f"GET {path}: HTTP {e.code} {status_reason(e)}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PluginError(f"GET {path}: {reason}") from None
    try:
        return json.loads(payload)
    except ValueError:
        raise PluginError(f"GET {path}: the response is not JSON") from None


def status_reason(error):
    """The `reason` of a Kubernetes Status body, or the HTTP reason phrase."""
    try:
        status = json.loads(error.read())
        return str(status.get("reason") or error.reason)
    except (ValueError, AttributeError, OSError):
        return str(error.reason)


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
    secret = get(server, path)
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
    credential = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    sys.stdout.write(json.dumps(credential) + "\n")


if __name__ == "__main__":
    try:
        main()
    except PluginError as e:
        print(f"secretreader-plugin: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - one line, never a traceback that might hold a token
        print(f"secretreader-plugin: unexpected {type(e).__name__}", file=sys.stderr)
        sys.exit(1)
