"""Checkpoints are whole or absent: manifests with sizes and SHA-256, damaged checkpoints
skipped on resume, `bertkit checkpoint verify`, failed saves (full disk, read-only
folder) that change nothing, and pickled code that never runs."""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.training import checkpoints as ckpt
from bertkit.training.loop import Trainer
from bertkit.training.resume import newest_readable_checkpoint
from tests.training.test_loop import ToyModel, ToyProgram, config, train


def flip_a_byte(path, offset: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_every_saved_folder_has_a_manifest_of_its_files(tmp_path):
    train(tmp_path, save_total_limit=5)
    for folder in [path for _, path in ckpt.list_checkpoints(tmp_path)] + [tmp_path / "final"]:
        manifest = json.loads((folder / ckpt.MANIFEST_FILE).read_text())
        files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {ckpt.MANIFEST_FILE}
        assert set(manifest["files"]) == files
        for name, entry in manifest["files"].items():
            assert entry["size"] == (folder / name).stat().st_size
            assert entry["sha256"] == ckpt.file_sha256(folder / name)
    assert all(problem is None for _, problem in ckpt.verify_run(tmp_path))


def test_a_damaged_checkpoint_is_named_by_verify_and_skipped_on_resume(tmp_path, capsys):
    train(tmp_path, save_total_limit=5)
    newest = ckpt.latest_checkpoint(tmp_path)
    flip_a_byte(newest / "model.safetensors")  # same size: only the hash can tell
    assert main(["checkpoint", "verify", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert f"{newest}: DAMAGED" in out and f"{tmp_path / 'final'}: ok" in out
    assert err.count("\n") == 1 and "model.safetensors: SHA-256 differs from the manifest" in err
    path, step, skipped = newest_readable_checkpoint(tmp_path)
    assert step == 8 and skipped == [f"{newest / 'model.safetensors'}: SHA-256 differs from the manifest's "
                                     "(the file is damaged)"]


def test_verify_names_a_truncated_file_and_a_missing_one(tmp_path, capsys):
    train(tmp_path, save_total_limit=5)
    first, second = [path for _, path in ckpt.list_checkpoints(tmp_path)][:2]
    state = first / ckpt.STATE_FILE
    state.write_bytes(state.read_bytes()[:100])
    (second / "model.safetensors").unlink()
    problems = dict(ckpt.verify_run(tmp_path))
    assert "bytes, the manifest records" in problems[first] and str(state) in problems[first]
    assert problems[second] == f"{second / 'model.safetensors'}: missing (listed in {second / ckpt.MANIFEST_FILE})"
    assert main(["checkpoint", "verify", str(first)]) == 1
    assert main(["checkpoint", "verify", str(tmp_path / "final")]) == 0


def test_verify_refuses_a_folder_without_checkpoints(tmp_path, capsys):
    assert main(["checkpoint", "verify", str(tmp_path)]) == 1
    assert "holds no checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EACCES])
def test_a_failed_save_is_one_line_keeps_the_last_checkpoint_and_resumes_exactly(tmp_path, monkeypatch, failure):
    reference, _ = train(tmp_path / "ref")
    real_save = ckpt.save_training_state

    def failing_save(directory, state):
        if state["step"] == 8:  # the disk fills (or the folder turns read-only) at the second save
            raise OSError(failure, os.strerror(failure))
        real_save(directory, state)

    monkeypatch.setattr(ckpt, "save_training_state", failing_save)
    run = tmp_path / "run"
    with pytest.raises(BertkitError) as caught:
        train(run)
    message = str(caught.value)
    assert "\n" not in message and os.strerror(failure) in message
    assert message.startswith("step 8: ") and "checkpoint-0000004 (continue with --resume)" in message
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []  # no half-written folder left
    assert [step for step, _ in ckpt.list_checkpoints(run)] == [4]
    assert ckpt.checkpoint_problem(run / "checkpoint-0000004") is None
    monkeypatch.setattr(ckpt, "save_training_state", real_save)
    checkpoint, _, _ = newest_readable_checkpoint(run)
    torch.manual_seed(123)
    model = ToyModel()
    model.load_state_dict(load_file(str(checkpoint / "model.safetensors")))
    Trainer(ToyProgram(), config(), run).train(model, resume_from=checkpoint)
    for p, q in zip(reference.parameters(), model.parameters()):
        assert torch.equal(p, q)


def test_a_read_only_output_folder_is_one_line(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ckpt.tempfile, "mkdtemp", refuse)
    with pytest.raises(BertkitError, match=r"checkpoint-0000004: cannot be written \(Permission denied\); nothing "
                                           r"already saved was changed; no checkpoint was written yet"):
        train(tmp_path)


class _WritesAFile:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (shutil.copyfile, (__file__, self.marker))


def test_a_training_state_carrying_code_is_refused_and_never_run(tmp_path):
    train(tmp_path)
    checkpoint = ckpt.latest_checkpoint(tmp_path)
    marker = tmp_path / "code-ran"
    torch.save({"step": 12, "payload": _WritesAFile(str(marker))}, checkpoint / ckpt.STATE_FILE)
    with pytest.raises(BertkitError, match=r"training_state\.pt: cannot read the training state"):
        ckpt.load_training_state(checkpoint)
    problem = ckpt.checkpoint_problem(checkpoint)
    assert problem is not None and "training_state.pt" in problem
    assert not marker.exists()


def test_a_weights_file_carrying_code_is_refused_and_never_run(tmp_path, tiny_config):
    from bertkit.model.bert import BertModel

    tiny_config.save_pretrained(tmp_path)
    marker = tmp_path / "code-ran"
    torch.save({"embeddings.word_embeddings.weight": _WritesAFile(str(marker))}, tmp_path / "pytorch_model.bin")
    with pytest.raises(BertkitError, match="pytorch_model.bin: cannot read weights safely"):
        BertModel.from_pretrained(tmp_path)
    assert not marker.exists()
