"""Config of the ``fleet-ray`` plugin."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FleetRayConfig"]


class FleetRayConfig(BaseModel):
    """Config of the ``fleet-ray`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: Workers (Ray actors) in the pool (default: as many as the cluster's CPUs hold at
    #: ``num_cpus`` each; never more than the sessions that may run at once).
    workers: int | None = Field(default=None, ge=1)
    #: The CPUs each worker reserves on the cluster.
    num_cpus: float = Field(default=1.0, ge=0)
    #: How many times a job is dispatched again after its worker died.
    max_retries: int = Field(default=3, ge=0)
    #: The address a local cluster (no ``--address``) binds and advertises.
    host: str = Field(default="127.0.0.1", min_length=1)
    #: The CPUs a local cluster offers (default: the machine's).
    local_cpus: int | None = Field(default=None, ge=1)
