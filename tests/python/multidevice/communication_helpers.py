# SPDX-License-Identifier: MIT
"""What the communication tests share: global inputs, expected shards taken
by hand, and the Communication lines of the last host program."""

from __future__ import annotations

import re

import torch

from mdfuser.multidevice import DeviceMesh


def global_tensor(shape, seed: int) -> torch.Tensor:
    """Integer-valued float32, the same on every rank: sums and gathers of
    it are exact, so results compare with torch.equal."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, tuple(shape), generator=g).to(torch.float32)


def part(t: torch.Tensor, axis: int, n: int, i: int) -> torch.Tensor:
    """Part i of n equal parts of `t` along `axis`."""
    assert t.size(axis) % n == 0
    return t.chunk(n, axis)[i]


def stream_then_device(t: torch.Tensor, axis: int, s: int, d: int, r: int) -> torch.Tensor:
    """Device r's part of `t` when `axis` is split into s stream chunks, each
    split across d devices: part r of every chunk, in chunk order."""
    return torch.cat([part(chunk, axis, d, r) for chunk in t.chunk(s, axis)], axis)


def mesh_of(devices) -> DeviceMesh:
    return DeviceMesh(torch.tensor(list(devices)))


def execute(test, fd, full: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs `fd` on this rank's shards of the global inputs `full` (a
    placeholder where this rank is outside an input's mesh), its
    collectives kept collectives (on GPUs too)."""
    inputs = [test.shard(t, tv) for t, tv in zip(full, fd.fusion.inputs())]
    return [out.cpu() for out in fd.execute(inputs, backend=test.collective_backend)]


def host_ir_lines(fd) -> list[str]:
    return fd.last_host_ir().splitlines()


def communications(fd) -> list[str]:
    return [line.strip() for line in host_ir_lines(fd) if line.strip().startswith("Communication ")]


def team(ranks) -> str:
    return "(" + " ".join(str(r) for r in ranks) + ")"


def expect_communication(fd, type_: str, ranks, *fields: str) -> str:
    """The program holds exactly one Communication, of `type_` with team
    `ranks` and every one of `fields` (like "op=max" or "root=0")."""
    (line,) = communications(fd)
    assert f"(type={type_}, team={team(ranks)}," in line, line
    for field in fields:
        assert f", {field}," in line, (field, line)
    return line


def expect_no_communication(fd) -> None:
    assert communications(fd) == [], fd.last_host_ir()


def expect_inside_stream_loop(fd, type_: str) -> None:
    """A Communication of `type_` sits in the body of the Stream loop (the
    first FOR, whose body switches to the iteration's worker stream)."""
    lines = host_ir_lines(fd)
    loop = next(i for i, line in enumerate(lines) if line.strip().startswith("FOR "))
    indent = len(lines[loop]) - len(lines[loop].lstrip())
    assert re.match(r"SetCurrentStream\(Stream i\d+\)", lines[loop + 1].strip()), lines[loop + 1]
    body = []
    for line in lines[loop + 1 :]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line.strip())
    matches = [line for line in body if line.startswith("Communication ")]
    assert len(matches) == 1, "\n".join(lines)
    assert f"(type={type_}," in matches[0], matches[0]
