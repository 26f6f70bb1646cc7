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


def call(server, method, path, body=None):
    """One JSON request to the apiserver; returns the decoded response object."""
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
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server + path, data=data, method=method)
    request.add_header("Authorization", "Bearer " + read_token_file("PLUGIN_ADMIN_TOKEN_FILE"))
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with opener.open(request, timeout=TIMEOUT_SECONDS) as response:
            payload = response.read()
    except urllib.error.HTTPError as e:
        raise PluginError(f"{method} {path}: HTTP {e.code} {status_reason(e)}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PluginError(f"{method} {path}: {reason}") from None
    try:
        return json.loads(payload)
    except ValueError:
        raise PluginError(f"{method} {path}: the response is not JSON") from None


def status_reason(error):
    """The `reason` of a Kubernetes Status body, or the HTTP reason phrase."""
    try:
        status = json.loads(error.read())
        return str(status.get("reason") or error.reason)
    except (ValueError, AttributeError, OSError):
        return str(error.reason)


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
    credential = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": expiry},
    }
    sys.stdout.write(json.dumps(credential) + "\n")


if __name__ == "__main__":
    try:
        main()
    except PluginError as e:
        print(f"tokenrequest-plugin: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - one line, never a traceback that might hold a token
        print(f"tokenrequest-plugin: unexpected {type(e).__name__}", file=sys.stderr)
        sys.exit(1)
