import pytest

SETTINGS = {"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "two"}


@pytest.fixture
def accelerate_env(monkeypatch):
    for key, value in SETTINGS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    return dict(SETTINGS)
