"""A diagnosis when the page does not name its GPU: judge the evidence on every GPU it may have run
on, rule out those whose bandwidth floor the observed steps beat, and report on one of the rest.

The report is about one deployment, stated in its header: the assumed GPU when the steps allow it,
else the slowest GPU they allow. Its scores and evidence all come from that deployment. Beside it,
every plausible GPU's scores are kept (`Diagnosis.alternatives`), so the report can say per cause
on which GPUs it is named, and whether the verdict hangs on the GPU at all.
"""

from __future__ import annotations

import dataclasses

from itlkit.diagnosis.deployment import InferredDeployment
from itlkit.diagnosis.evidence import Timeline
from itlkit.diagnosis.scoring import CAUSES, Alternative, Diagnosis, diagnose
from itlkit.physics.hardware import get_gpu
from itlkit.physics.roofline import capacity


def diagnose_deployment(timeline: Timeline, inferred: InferredDeployment, **settings) -> Diagnosis:
    """`diagnose` on the inferred deployment; when its GPU was not stated, on each GPU of
    `inferred.gpus` as well, reported on the assumed GPU if the steps allow it, else on the
    first GPU (slowest first) they allow."""
    said = {"assumptions": inferred.assumptions}
    if inferred.gpu_stated:
        return dataclasses.replace(diagnose(timeline, inferred.deployment, **settings), **said)
    assumed = inferred.deployment.gpu.slug
    results = {}
    for name in dict.fromkeys([*inferred.gpus, assumed]):
        deployment = dataclasses.replace(inferred.deployment, gpu=get_gpu(name))
        results[name] = (deployment, diagnose(timeline, deployment, **settings))
    alternatives = tuple(_alternative(name, *results[name]) for name in results)
    plausible = [a.gpu for a in alternatives if a.plausible]
    chosen = assumed if assumed in plausible or not plausible else plausible[0]
    return dataclasses.replace(results[chosen][1], alternatives=alternatives, **said)


def _alternative(name: str, deployment, d: Diagnosis) -> Alternative:
    scores = {f.cause: f.score for f in d.findings}
    fits = capacity(deployment, context_tokens=d.context_tokens).weights_fit
    return Alternative(name, d.verdict_key, d.top.score, d.floor_seconds, d.step_seconds, fits,
                       tuple((cause, scores[cause]) for cause in CAUSES if cause in scores),
                       d.impossible)  # fmt: skip
