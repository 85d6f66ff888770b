#!/usr/bin/env python3
"""Checks dist/ without a container engine or a cluster: the Kubernetes manifests parse and agree
with each other and with ampd.toml (probes on the right handlers, ports, selectors, a
termination grace period that covers drain_delay + grace_period), the Containerfile has what it
must (multi-stage, bookworm, non-root, EXPOSE, HEALTHCHECK, STOPSIGNAL, sources that exist), and
the systemd unit allows an upgrade. With the path of an ampd binary, `ampd check` also reads the
shipped ampd.toml. Run by tests/it/dist.rs; needs python3-yaml.

usage: python3 dist/check.py [AMPD_BINARY]
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib

import yaml

DIST = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DIST)
problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)


def seconds(text):
    """A duration as ampd reads it: a number of seconds, or "500ms", "5s", "2m"."""
    if isinstance(text, (int, float)):
        return float(text)
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    expect(match is not None, f"unreadable duration {text!r}")
    if match is None:
        return 0.0
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    return float(match.group(1)) * scale


# --- ampd.toml -----------------------------------------------------------------------------------
with open(os.path.join(DIST, "container", "ampd.toml"), encoding="utf-8") as file:
    toml_text = file.read()
config = tomllib.loads(toml_text)
port = int(config["listen"].rsplit(":", 1)[1])
drain_delay = seconds(config.get("drain_delay", 0))
grace_period = seconds(config.get("grace_period", "30s"))
handlers = {
    location["path"]: location.get("handler", "static")
    for site in config["site"]
    for location in site.get("location", [])
}
health_paths = [path for path, handler in handlers.items() if handler == "health"]
expect(len(health_paths) == 1, f"ampd.toml: one health location expected, found {health_paths}")
health_path = health_paths[0] if health_paths else None
expect(drain_delay > 0, "ampd.toml: drain_delay must be set behind a balancer")

# --- Kubernetes ----------------------------------------------------------------------------------
manifests = {}
kube = os.path.join(DIST, "kubernetes")
for name in sorted(os.listdir(kube)):
    if name.endswith(".yaml"):
        with open(os.path.join(kube, name), encoding="utf-8") as file:
            for document in yaml.safe_load_all(file):
                expect(document.get("kind") not in manifests, f"{name}: a second {document.get('kind')}")
                manifests[document["kind"]] = (name, document)
expect(
    set(manifests) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Kustomization"},
    f"kubernetes/: unexpected kinds {sorted(manifests)}",
)
listed = set(manifests["Kustomization"][1]["resources"])
expect(
    listed == {name for name, _ in manifests.values()} - {"kustomization.yaml"},
    f"kustomization.yaml lists {sorted(listed)}",
)
expect(
    manifests["ConfigMap"][1]["data"]["ampd.toml"] == toml_text,
    "configmap.yaml's ampd.toml differs from dist/container/ampd.toml",
)
deployment = manifests["Deployment"][1]
labels = deployment["spec"]["template"]["metadata"]["labels"]
expect(deployment["spec"]["selector"]["matchLabels"] == labels, "deployment: selector != pod labels")
pod = deployment["spec"]["template"]["spec"]
(container,) = pod["containers"]
expect(
    [p["containerPort"] for p in container["ports"]] == [port],
    f"deployment: containerPort is not ampd.toml's port {port}",
)
readiness = container["readinessProbe"]
liveness = container["livenessProbe"]
expect(readiness["httpGet"]["path"] == health_path, "readiness probe must ask the health handler")
expect(
    readiness["periodSeconds"] * readiness["failureThreshold"] < drain_delay,
    "readiness must fail within drain_delay (periodSeconds x failureThreshold < drain_delay)",
)
expect(
    handlers.get(liveness["httpGet"]["path"]) not in (None, "health"),
    "liveness probe must ask a handler that stays 200 while draining (not health)",
)
expect(
    liveness["periodSeconds"] * liveness["failureThreshold"] >= grace_period,
    "liveness must not kill a pod while it drains (period x failures >= grace_period)",
)
pre_stop = " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
expect("kill -TERM 1" in pre_stop, "preStop must start ampd's drain")
expect(
    pod["terminationGracePeriodSeconds"] > drain_delay + grace_period,
    "terminationGracePeriodSeconds must exceed drain_delay + grace_period",
)
expect(pod["securityContext"]["runAsNonRoot"] is True, "pods must run as non-root")
service = manifests["Service"][1]
expect(service["spec"]["selector"] == labels, "service: selector != pod labels")
port_names = {p["name"] for p in container["ports"]}
expect(
    all(p["targetPort"] in port_names or p["targetPort"] == port for p in service["spec"]["ports"]),
    "service: targetPort names no container port",
)
budget = manifests["PodDisruptionBudget"][1]
expect(budget["spec"]["selector"]["matchLabels"] == labels, "pdb: selector != pod labels")
expect(
    budget["spec"].get("maxUnavailable", 0) < deployment["spec"]["replicas"],
    "pdb: must keep a pod",
)

# --- Containerfile -------------------------------------------------------------------------------
with open(os.path.join(DIST, "Containerfile"), encoding="utf-8") as file:
    text = re.sub(r"\\\n", " ", file.read())
instructions = [
    line.strip().split(None, 1)
    for line in text.splitlines()
    if line.strip() and not line.strip().startswith("#")
]
froms = [rest for word, rest in instructions if word == "FROM"]
expect(len(froms) == 2, "Containerfile: a build stage and a run stage")
expect(re.search(r"rust:.*bookworm.* AS build$", froms[0]) is not None, f"build stage: {froms[0]}")
expect(re.search(r"debian:bookworm", froms[-1]) is not None, f"run stage: {froms[-1]}")
words = dict((word, rest) for word, rest in instructions)
expect(words.get("USER") not in (None, "root", "0"), "Containerfile: USER must be non-root")
expect(words.get("EXPOSE") == str(port), f"Containerfile: EXPOSE {port}")
expect(words.get("STOPSIGNAL") == "SIGTERM", "Containerfile: STOPSIGNAL SIGTERM")
expect(
    health_path is not None and f":{port}{health_path}" in words.get("HEALTHCHECK", ""),
    "Containerfile: HEALTHCHECK must ask the health handler",
)
for word, rest in instructions:
    if word == "COPY" and not rest.startswith("--from"):
        sources = shlex.split(rest)[:-1]
        for source in sources:
            expect(source == "." or os.path.exists(os.path.join(ROOT, source)), f"COPY {source}: missing")

# --- systemd -------------------------------------------------------------------------------------
with open(os.path.join(DIST, "ampd.service"), encoding="utf-8") as file:
    unit = file.read()
expect("NotifyAccess=all" in unit, "ampd.service: an upgraded process notifies: NotifyAccess=all")
stop = re.search(r"^TimeoutStopSec=(\d+)", unit, re.M)
expect(stop is not None and int(stop.group(1)) > 30, "ampd.service: TimeoutStopSec > grace_period")
# Documentation= names pages that exist once installed as the unit's header says.
documents = re.findall(r"^Documentation=(.*)$", unit, re.M)
expect(documents, "ampd.service: no Documentation=")
installs_docs = "install -Dm644 docs/*.md -t /usr/share/doc/ampd/" in unit
for url in " ".join(documents).split():
    local = url.removeprefix("file:///usr/share/doc/ampd/")
    expect(
        url != local and installs_docs and os.path.isfile(os.path.join(ROOT, "docs", local)),
        f"ampd.service: Documentation={url} is not a document the header installs",
    )

# --- ampd check ----------------------------------------------------------------------------------
if len(sys.argv) > 1:
    with tempfile.TemporaryDirectory() as scratch:
        www = os.path.join(ROOT, "examples", "www")
        path = os.path.join(scratch, "ampd.toml")
        with open(path, "w", encoding="utf-8") as file:
            file.write(toml_text.replace('"/srv/www"', f'"{www}"'))
        result = subprocess.run(
            [sys.argv[1], "check", path], capture_output=True, text=True, timeout=30, check=False
        )
        expect(result.returncode == 0, f"ampd check: {result.stderr.strip()}")

for problem in problems:
    print(f"dist: {problem}")
print(f"dist: {'FAILED' if problems else 'OK'} ({len(manifests)} manifests, Containerfile, ampd.service)")
sys.exit(1 if problems else 0)
