"""The Kubernetes manifests in deploy/kubernetes/ (issue 49): valid against Kubernetes' own
schemas, offline and strictly (`kubernetes-validate`), and agreeing with the image: its
port and user, the memory budget, the health probes, cookie affinity, and one cookie
secret and cache hash seed for every replica. No cluster runs here."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml
from streamlit import config

from tests.support.server import ROOT

K8S = ROOT / "deploy" / "kubernetes"
VERSION = kubernetes_validate.latest_version()
HEALTH = "/_stcore/health"


def _documents() -> list[dict]:
    """The resources: rendered by `kubectl kustomize` where it is installed, else each
    file the kustomization lists (its generated Secret left out)."""
    if shutil.which("kubectl"):
        rendered = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True,
                                  text=True, timeout=120, check=True).stdout
        return [doc for doc in yaml.safe_load_all(rendered) if doc]
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    return [doc for name in listed for doc in yaml.safe_load_all((K8S / name).read_text())]


DOCUMENTS = _documents()
BY_KIND = {doc["kind"]: doc for doc in DOCUMENTS}


def _dockerfile(instruction: str) -> str:
    """The argument of the Dockerfile's last ``instruction`` (e.g. USER)."""
    found = re.findall(rf"^{instruction} (.+)$", (ROOT / "Dockerfile").read_text(), re.M)
    return found[-1]


def _image_env() -> dict[str, str]:
    """The Dockerfile's ENV of its final stage, as name -> value."""
    text = (ROOT / "Dockerfile").read_text().split("\nENV ")[-1].split("\nUSER")[0]
    return dict(re.findall(r"(\w+)=(\S+)", text))


def test_the_kustomization_lists_every_manifest():
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    files = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == files


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_resource_is_valid_against_kubernetes_schemas(doc):
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_validation_is_strict():
    broken = copy.deepcopy(BY_KIND["Deployment"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def _container() -> dict:
    return BY_KIND["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_two_replicas_or_more_each_probed_on_streamlits_health():
    assert BY_KIND["Deployment"]["spec"]["replicas"] >= 2
    assert BY_KIND["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2
    container = _container()
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert port == int(env["PORT"]) == int(_image_env()["PORT"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, probe


def test_memory_fits_the_budget_and_the_user_is_the_images():
    container = _container()
    budget = int({e["name"]: e["value"] for e in container["env"]}["EXPLORER_MEMORY_BUDGET_MB"])
    assert budget == int(_image_env()["EXPLORER_MEMORY_BUDGET_MB"])
    for kind in ("requests", "limits"):
        limit = container["resources"][kind]["memory"]
        assert limit.endswith("Mi") and int(limit[:-2]) >= budget + 256, (kind, limit)
    security = BY_KIND["Deployment"]["spec"]["template"]["spec"]["securityContext"]
    user, group = _dockerfile("USER").split(":")
    assert security["runAsNonRoot"] and (security["runAsUser"], security["runAsGroup"]) \
        == (int(user), int(group))
    assert "EXPLORER_MODEL_FOLDERS" not in str(container)
    assert "EXPLORER_RUN_CODE" not in str(container)


def test_every_replica_reads_the_same_cookie_secret_and_hash_seed():
    secret_names = {ref["secretRef"]["name"] for ref in _container()["envFrom"]}
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    generated = {g["name"]: g["literals"] for g in kustomization["secretGenerator"]}
    if "Secret" in BY_KIND:  # rendered: the generator's name carries a hash of its values
        secret_names = {re.sub(r"-[a-z0-9]{10}$", "", name) for name in secret_names}
    assert secret_names == set(generated)
    names = {literal.split("=")[0] for literal in generated[secret_names.pop()]}
    # The variables Streamlit itself reads for these options:
    options = config.get_config_options()
    assert names == {options[key].env_var for key in ("server.cookieSecret", "runner.cacheHashSeed")}


def test_the_ingress_keeps_a_browser_on_its_replica():
    ingress = BY_KIND["Ingress"]
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == BY_KIND["Service"]["metadata"]["name"]
