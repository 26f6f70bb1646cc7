"""What the test exec credential plugins share: the environment they read, one JSON request
to a loopback apiserver (no proxy, no redirect, a timeout), the ExecCredential they print, and
errors worth one line.

Python 3 standard library only. The plugins find it beside them (Python puts a script's own
directory first on its import path).
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

TIMEOUT_SECONDS = 10
DEFAULT_API_VERSION = "client.authentication.k8s.io/v1"


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


def exec_info(needed):
    """KUBERNETES_EXEC_INFO as an object; `{}` when it is not set and not `needed`."""
    raw = os.environ.get("KUBERNETES_EXEC_INFO", "").strip()
    if not raw and not needed:
        return {}
    try:
        info = json.loads(required("KUBERNETES_EXEC_INFO"))
    except ValueError:
        raise PluginError("KUBERNETES_EXEC_INFO is not JSON") from None
    if not isinstance(info, dict):
        raise PluginError("KUBERNETES_EXEC_INFO is not a JSON object")
    return info


def object_path(namespace, resource, name):
    """The API path of a namespaced core object, each name quoted."""
    ns, name = (urllib.parse.quote(part, safe="") for part in (namespace, name))
    return f"/api/v1/namespaces/{ns}/{resource}/{name}"


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


def print_credential(token, api_version=DEFAULT_API_VERSION, expiry=None):
    """Prints the ExecCredential that hands out `token`, with `expiry` when there is one."""
    status = {"token": token}
    if expiry is not None:
        status["expirationTimestamp"] = expiry
    credential = {"apiVersion": api_version, "kind": "ExecCredential", "status": status}
    sys.stdout.write(json.dumps(credential) + "\n")


def run(program, main):
    """Runs `main`; a failure is one line on stderr and exit status 1, never a traceback that
    might hold a token."""
    try:
        main()
    except PluginError as e:
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001
        print(f"{program}: unexpected {type(e).__name__}", file=sys.stderr)
        sys.exit(1)
