"""Which ``--load-image`` images every kind node already holds, asked once per node.

``kind load docker-image`` decides per image and per node whether to import, by one ``docker exec <node> crictl
inspecti <image>`` each (kind v0.33.0 ``pkg/cmd/kind/load/docker-image``): 15 images on 7 nodes are 105 privileged
execs before anything is loaded, and an image whose check fails is imported again. On a reused cluster, where every
image is there already, loading is then all cost: on the by-hand kind of docs/performance.md it took 5 minutes at a
load average of 26–31 on 2 cores, once long enough for the API server to stop answering. One ``crictl images -o
json`` per node tells the same: an image is on a node when the node lists its name with the local Docker's image
ID, kind's own test. Only the others go to ``kind load``.

Anything unreadable (no Docker, no node, an exec or its output failing) makes no image present: then kind decides,
as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kai_conformance.clusters import commands

DOCKER_HUB = "docker.io"


def normalized(image: str) -> str | None:
    """The name containerd lists for ``image`` (``busybox`` → ``docker.io/library/busybox:latest``); None for a
    reference by digest, which this check leaves to kind."""
    if "@" in image:
        return None
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = DOCKER_HUB, image
        if "/" not in path:
            path = f"library/{path}"
    last = path.rsplit("/", 1)[-1]
    return f"{domain}/{path}" + ("" if ":" in last else ":latest")


def present_everywhere(
    images: Sequence[str], local_ids: dict[str, str], node_listings: dict[str, dict[str, set[str]]]
) -> list[str]:
    """The images every node lists under their name with the local ID (``node_listings``: node → image ID → the
    names it carries); none without nodes."""
    if not node_listings:
        return []
    found = []
    for image in images:
        name, local = normalized(image), local_ids.get(image)
        if name and local and all(name in names.get(local, set()) for names in node_listings.values()):
            found.append(image)
    return found


def listing(crictl_images_json: str) -> dict[str, set[str]]:
    """``crictl images -o json`` → image ID → its names."""
    return {
        image["id"]: set(image.get("repoTags") or [])
        for image in json.loads(crictl_images_json).get("images") or []
        if isinstance(image, dict) and image.get("id")
    }


def already_loaded(
    runner: commands.Runner, kind: str, cluster: str, images: Sequence[str], timeout: float
) -> list[str]:
    """The ``images`` every node of kind cluster ``cluster`` holds with the local Docker's ID (see the module)."""
    docker = commands.tool("docker")
    local = runner([docker, "image", "inspect", "--format", "{{.Id}}", *images], timeout=timeout, check=False)
    ids = local.stdout.split()
    if local.returncode != 0 or len(ids) != len(images):
        return []
    nodes = runner([kind, "get", "nodes", "--name", cluster], timeout=timeout, check=False)
    if nodes.returncode != 0:
        return []
    listings: dict[str, dict[str, set[str]]] = {}
    for node in nodes.stdout.split():
        answer = runner([docker, "exec", node, "crictl", "images", "-o", "json"], timeout=timeout, check=False)
        if answer.returncode != 0:
            return []
        try:
            listings[node] = listing(answer.stdout)
        except (ValueError, AttributeError):
            return []
    return present_everywhere(images, dict(zip(images, ids, strict=True)), listings)
