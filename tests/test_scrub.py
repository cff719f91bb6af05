"""bot/scrub.py: every pattern has a case it must catch and a look-alike it must leave alone.

Fake credentials are assembled by concatenation at run time, so no token-shaped literal is
ever committed (secret scanners would flag it, and so would our own scrubber).
"""
from __future__ import annotations

import random
import string

import pytest

from bot.scrub import Finding, find_secrets, local_identity, scrub

rng = random.Random(1234)


def fake(chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
HF = "hf" + "_" + fake(ALNUM, 34)
GHP = "gh" + "p_" + fake(ALNUM, 36)
GHO = "gh" + "o_" + fake(ALNUM, 36)
GHU = "gh" + "u_" + fake(ALNUM, 36)
GHS = "gh" + "s_" + fake(ALNUM, 36)
GHR = "gh" + "r_" + fake(ALNUM, 36)
GH_PAT = "github" + "_pat_" + fake(ALNUM, 22) + "_" + fake(ALNUM, 59)
AWS_ID = "AK" + "IA" + fake(UPPER, 16)
AWS_SECRET = fake(ALNUM + "/+", 40)
OPENAI = "sk" + "-proj-" + fake(ALNUM, 48)
OPENAI_LEGACY = "sk" + "-" + fake(ALNUM, 48)
JWT = "ey" + "J" + fake(ALNUM, 20) + "." + "ey" + "J" + fake(ALNUM, 30) + "." + fake(ALNUM + "-_", 43)
PEM = ("-----BEGIN " + "RSA PRIVATE KEY-----\n" + fake(ALNUM, 64) + "\n" + fake(ALNUM, 64) + "\n"
       "-----END " + "RSA PRIVATE KEY-----")

NO_NAMES: tuple[str, ...] = ()


def kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def assert_gone(secret: str, text: str) -> None:
    """The value and any 12-character piece of it are absent."""
    assert secret not in text
    for i in range(0, max(1, len(secret) - 12), 6):
        assert secret[i:i + 12] not in text, secret[i:i + 12]


@pytest.mark.parametrize("value,kind", [
    (HF, "hf_token"), (GHP, "github_token"), (GHO, "github_token"), (GHU, "github_token"),
    (GHS, "github_token"), (GHR, "github_token"), (GH_PAT, "github_token"), (AWS_ID, "aws_access_key"),
    (OPENAI, "openai_key"), (OPENAI_LEGACY, "openai_key"), (JWT, "jwt"),
])
def test_token_is_redacted_and_reported_without_its_value(value: str, kind: str) -> None:
    text = f"login failed for {value} (retrying)\n"
    result = scrub(text, names=NO_NAMES)
    assert_gone(value, result.text)
    assert f"<redacted:{kind}>" in result.text
    assert "login failed for" in result.text and "(retrying)" in result.text
    assert kinds(result.findings) == [kind]
    f = result.findings[0]
    assert f.secret and f.line == 1
    assert value not in f.preview and value[5:15] not in f.preview and value[-8:] not in f.preview
    assert f"({len(value)} chars)" in f.preview
    assert kinds(find_secrets(text)) == [kind]
    assert find_secrets(result.text) == []


@pytest.mark.parametrize("text", [
    "hf_hub_download(repo_id='x', filename='config.json')",   # hf_ API names
    "from huggingface_hub import hf_hub_url, hf_api",
    "hf_" + "a" * 12,                                           # too short to be a token
    "ghp_" + "x" * 10, "the github_pat_ prefix is documented",
    "AKIA is how AWS key ids start",
    "scikit-learn and sk-learn are packages; risk-" + "a" * 30,  # sk- inside a word
    "eyJhbGciOiJIUzI1NiJ9 alone is a base64 header, not a JWT",
    "tokenizer.pad_token = tokenizer.eos_token\npad_token_id=0\nmodel.config.eos_token_id = 2",
    'pad_token="<pad>", eos_token="</s>", cache_key = "layer.0.attn"',
    "export HF_TOKEN=$HF_TOKEN\nHF_TOKEN=\nOPENAI_API_KEY=${OPENAI_API_KEY}",
    "os.environ.get('HF_TOKEN')",
    "KeyError: 22",
    "-----BEGIN is just a dash run",
    "Authorization headers are documented at https://docs.github.com",
])
def test_look_alikes_are_not_secrets(text: str) -> None:
    assert find_secrets(text) == []
    assert scrub(text, names=NO_NAMES).text == text


def test_pem_block_is_redacted_whole() -> None:
    text = "key:\n" + PEM + "\nafter"
    result = scrub(text, names=NO_NAMES)
    assert result.text == "key:\n<redacted:pem_block RSA PRIVATE KEY>\nafter"
    assert kinds(result.findings) == ["pem_block"] and result.findings[0].line == 2
    # An unterminated block (a truncated paste) is redacted to the end.
    cut = scrub("x\n" + PEM[:120], names=NO_NAMES)
    assert "<redacted:pem_block" in cut.text and PEM[40:60] not in cut.text


@pytest.mark.parametrize("text,value", [
    ("curl -H 'Authorization: Bearer " + "abc" + "DEF123456xyz' https://api", "abcDEF123456xyz"),
    ('headers = {"Authorization": "token ' + "zz9" + 'zz9zz9zz9"}', "zz9zz9zz9zz9"),
    ("Proxy-Authorization: Basic " + "dXNlcjpw" + "YXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
])
def test_authorization_header_value_is_redacted(text: str, value: str) -> None:
    result = scrub(text, names=NO_NAMES)
    assert value not in result.text and "<redacted:authorization_header>" in result.text
    assert "authorization" in result.text.lower()
    assert kinds(find_secrets(text)) == ["authorization_header"]


@pytest.mark.parametrize("text,value", [
    ("WANDB_API_KEY=" + "0123abcd" * 5, "0123abcd" * 5),
    ("export MY_SERVICE_TOKEN='" + "q1w2e3r4t5y6" + "'", "q1w2e3r4t5y6"),
    ('os.environ["DB_PASSWORD"] = "' + "hunter2hunter2" + '"', "hunter2hunter2"),
    ("aws_secret_access_key = " + AWS_SECRET, AWS_SECRET),
    ('client = Client(api_key="' + "a1b2c3d4e5f6g7h8i9" + '")', "a1b2c3d4e5f6g7h8i9"),
])
def test_secret_assignments_are_redacted(text: str, value: str) -> None:
    result = scrub(text, names=NO_NAMES)
    assert value not in result.text
    assert result.secrets and find_secrets(text)
    assert find_secrets(result.text) == []


def test_assignment_holding_a_known_token_is_reported_once_as_that_token() -> None:
    result = scrub("HF_TOKEN=" + HF, names=NO_NAMES)
    assert result.text == "HF_TOKEN=<redacted:hf_token>"
    assert kinds(result.findings) == ["hf_token"]


def test_token_split_across_lines_in_a_traceback() -> None:
    # A terminal (or a forum) wrapped the exception line in the middle of the token.
    cut = 21
    text = ("Traceback (most recent call last):\n"
            '  File "/home/alice/run.py", line 3, in <module>\n'
            "    login(token)\n"
            f"ValueError: Invalid token passed: {HF[:cut]}\n"
            f"{HF[cut:]} is not valid for this repo\n")
    assert HF not in text  # the whole token never appears on one line
    found = find_secrets(text)
    assert kinds(found) == ["hf_token"] and "split across lines" in found[0].preview and found[0].line == 4
    result = scrub(text, names=NO_NAMES)
    assert HF[:cut] not in result.text and HF[cut:] not in result.text
    assert "is not valid for this repo" in result.text
    assert find_secrets(result.text) == []


def test_split_detection_leaves_ordinary_wrapped_lines_alone() -> None:
    # A complete token at a line end, and a short hf_ name followed by a word: no joining.
    text = f"token {HF}\nTraceback (most recent call last):\nhf_api\ncall failed\n"
    result = scrub(text, names=NO_NAMES)
    assert "Traceback (most recent call last):" in result.text
    assert "hf_api\ncall failed" in result.text
    assert kinds(result.findings) == ["hf_token"]


WINDOWS_TB = (
    "Traceback (most recent call last):\n"
    '  File "E:\\Folder\\inference_worker.py", line 414, in inference_worker_loop\n'
    "    model = _worker_load_model(cfg)\n"
    '  File "E:\\Folder\\gemma_env\\Lib\\site-packages\\peft\\peft_model.py", line 582, in from_pretrained\n'
    "    model.load_adapter(model_id, adapter_name)\n"
    '  File "C:\\Users\\Jane Doe\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages'
    '\\accelerate\\hooks.py",'
    " line 695, in attach_align_device_hook_on_blocks\n"
    "RuntimeError: Tensor.item() cannot be called on meta tensors\n")


def test_windows_traceback_paths() -> None:
    result = scrub(WINDOWS_TB, names=NO_NAMES)
    assert 'File "<env>/peft/peft_model.py", line 582' in result.text
    assert 'File "<env>/accelerate/hooks.py", line 695' in result.text
    assert 'File "<path>\\inference_worker.py", line 414' in result.text
    for private in ("Folder", "gemma_env", "Jane", "Doe", "AppData", "E:\\", "C:\\"):
        assert private not in result.text
    assert "RuntimeError: Tensor.item() cannot be called on meta tensors" in result.text
    assert scrub(result.text, names=NO_NAMES).findings == []  # idempotent


def test_windows_home_keeps_the_rest_of_the_path() -> None:
    assert scrub(r"saved to C:\Users\jdoe\runs\out.bin", names=NO_NAMES).text == r"saved to ~\runs\out.bin"
    assert scrub("cd C:/Users/jdoe/runs", names=NO_NAMES).text == "cd ~/runs"
    assert scrub(r'offload_folder=r"E:\Folder\offload_temp"', names=NO_NAMES).text == \
        r'offload_folder=r"<path>\offload_temp"'


@pytest.mark.parametrize("text,expected", [
    ('File "/home/alice/proj/train.py", line 3', 'File "~/proj/train.py", line 3'),
    ("cache in /Users/bob/.cache/huggingface", "cache in ~/.cache/huggingface"),
    ("/root/.cache/huggingface/hub", "~/.cache/huggingface/hub"),
    ("wsl: /mnt/c/Users/carol/data.json", "wsl: ~/data.json"),
    ('File "/home/alice/.venv/lib/python3.11/site-packages/peft/peft_model.py", line 9',
     'File "<env>/peft/peft_model.py", line 9'),
    ("/opt/conda/envs/x/lib/python3.10/site-packages/torch/nn/modules/module.py",
     "<env>/torch/nn/modules/module.py"),
    ("/usr/lib/python3/dist-packages/yaml/__init__.py", "<env>/yaml/__init__.py"),
    # pip's record of a local wheel (env.json's url): the home inside a file:// URL goes too
    ("archive file:///home/bob/wheels/bnb.whl", "archive file://~/wheels/bnb.whl"),
])
def test_posix_homes_and_site_packages(text: str, expected: str) -> None:
    assert scrub(text, names=NO_NAMES).text == expected


@pytest.mark.parametrize("text", [
    "/usr/lib/python3.11/json/decoder.py", "/tmp/tmpabc/run.py", "/rootfs/x", "https://example.org/home/page",
    "see docs/home/index.md", "x = threading.local()", "torch.nn.modules.module",
])
def test_paths_that_are_not_personal_stay(text: str) -> None:
    assert scrub(text, names=NO_NAMES).text == text


@pytest.mark.parametrize("text,expected,kind", [
    ("contact jane.doe+hf@example.co.uk today", "contact <email> today", "email"),
    ("connect to gpu-node-17.cluster.local:29500", "connect to <host>:29500", "hostname"),
    ("ip-10-0-0-12.ec2.internal refused", "<host> refused", "hostname"),
    ("build box: ci-runner.corp", "build box: <host>", "hostname"),
    ("MASTER_ADDR=192.168.1.20", "MASTER_ADDR=<ip>", "private_ip"),
])
def test_contacts_and_internal_hosts(text: str, expected: str, kind: str) -> None:
    result = scrub(text, names=NO_NAMES)
    assert result.text == expected
    assert kinds(result.findings) == [kind] and not result.findings[0].secret


@pytest.mark.parametrize("text", [
    "see https://huggingface.co/docs and github.com/huggingface/peft",
    "@torch.no_grad()\ndef f(): ...", "pip install peft@git+https://x",  # no dot-TLD after @
    "version 10.0.1, tensor shape 192.168", "Python 3.11.7 on 8.8.8.8",
])
def test_public_names_and_numbers_stay(text: str) -> None:
    assert scrub(text, names=NO_NAMES).text == text


def test_machine_names_are_scrubbed_as_words_only() -> None:
    text = "worker on dgx-alice-01 failed; user jdoe42 at /srv/jdoe42/x; jdoe42x is another word"
    result = scrub(text, names=("dgx-alice-01", "jdoe42"))
    assert "dgx-alice-01" not in result.text
    assert "/srv/<user-or-host>/x" in result.text and "jdoe42x" in result.text
    assert result.text.count("<user-or-host>") == 3


def test_local_identity_is_this_machines_names_minus_generic_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.scrub as scrub_mod

    monkeypatch.setattr(scrub_mod.socket, "gethostname", lambda: "dgx-jane-07.lab.example.org")
    monkeypatch.setattr(scrub_mod.getpass, "getuser", lambda: "jdoe42")
    monkeypatch.setenv("USER", "jdoe42")
    monkeypatch.setenv("USERNAME", "runner")
    assert local_identity() == ("dgx-jane-07", "dgx-jane-07.lab.example.org", "jdoe42")
    monkeypatch.setattr(scrub_mod.socket, "gethostname", lambda: "gpu")
    monkeypatch.setattr(scrub_mod.getpass, "getuser", lambda: "root")
    monkeypatch.setenv("USER", "worker")
    assert local_identity() == ()
    # The default of scrub() is that identity.
    monkeypatch.setattr(scrub_mod.socket, "gethostname", lambda: "dgx-jane-07")
    assert scrub("host dgx-jane-07 ran out of memory on the gpu").text == \
        "host <user-or-host> ran out of memory on the gpu"


def test_findings_report_lines_and_never_values() -> None:
    text = f"ok\nHF_TOKEN={HF}\nby jane@example.com\n"
    result = scrub(text, names=NO_NAMES)
    assert [(f.kind, f.line) for f in result.findings] == [("hf_token", 2), ("email", 3)]
    for f in result.findings:
        assert HF[3:] not in str(f) and "jane" not in str(f)
    assert Finding.from_dict(result.findings[0].to_dict()) == result.findings[0]


# --- kinds from the security probe (issue 18): each planted where real scripts leak them ------
HEX = "0123456789abcdef"
SLACK_BOT = "xo" + "xb-" + fake(string.digits, 12) + "-" + fake(string.digits, 13) + "-" + fake(ALNUM, 24)
SLACK_HOOK = ("https://hooks." + "slack.com/services/T" + fake(UPPER, 8) + "/B" + fake(UPPER, 8) + "/"
              + fake(ALNUM, 24))
HF_ORG = "api" + "_org_" + fake(ALNUM, 34)
GOOGLE = "AI" + "za" + fake(ALNUM, 35)
NPM = "np" + "m_" + fake(ALNUM, 36)
PYPI = "py" + "pi-AgEI" + fake(ALNUM, 80)
STRIPE = "sk" + "_live_" + fake(ALNUM, 32)
WANDB = fake(HEX, 40)
AZURE = fake(ALNUM + "+/", 86) + "=="
PASSWORD = "Tr0ub4dor&3-" + fake(ALNUM, 6)
URL_PASS = "s3cr3t-" + fake(ALNUM, 8)


@pytest.mark.parametrize("text,value", [
    (f'client = WebClient(token="{SLACK_BOT}")', SLACK_BOT),
    (f"requests.post('{SLACK_HOOK}', json=payload)", SLACK_HOOK[-24:]),
    (f"HfApi(token='{HF_ORG}')", HF_ORG),
    (f"ValueError: invalid key {GOOGLE} for the Gemini endpoint", GOOGLE),
    (f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    (f"twine upload -p {PYPI} dist/*", PYPI),
    (f'stripe.api_key = "{STRIPE}"', STRIPE),
    (f'wandb.login(key="{WANDB}")', WANDB),
    (f"conn = 'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE};EndpointSuffix=core.windows.net'",
     AZURE),
    (f"db = connect(host='db', password='{PASSWORD}')", PASSWORD),
    (f"git clone https://carol:{URL_PASS}@git.example.com/team/repo.git", URL_PASS),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
])
def test_more_credential_kinds_are_secrets(text: str, value: str) -> None:
    result = scrub(text, names=NO_NAMES)
    assert_gone(value, result.text)
    assert result.secrets, result.findings
    assert find_secrets(text), text
    assert find_secrets(result.text) == [], result.text
    assert all(value not in f.preview for f in result.findings)


def test_url_credentials_take_the_user_name_too() -> None:
    result = scrub(f"fetching https://carol:{URL_PASS}@git.example.com/x.git failed", names=NO_NAMES)
    assert "carol" not in result.text and "git.example.com/x.git" in result.text


@pytest.mark.parametrize("text,gone", [
    ("FileNotFoundError: 'C:\\\\Users\\\\carol\\\\data\\\\x.json'", "carol"),   # a repr doubles backslashes
    ("listening on fd12:3456:789a:1::2 port 29500", "fd12:3456"),
    ("peer fe80::1c2d:3e4f:5a6b:7c8d%eth0 unreachable", "fe80::1c2d"),
])
def test_more_private_details(text: str, gone: str) -> None:
    result = scrub(text, names=NO_NAMES)
    assert gone not in result.text and result.findings and not result.secrets


@pytest.mark.parametrize("text", [
    'tokenizer.pad_token = "<pad>"',
    'LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")',
    "--hash=sha256:" + fake(HEX, 64),
    'model = AutoModelForCausalLM.from_pretrained("google/gemma-4-e2b-it", device_map={"": 0})',
    "Failure signature `4652b09e9c`: `ValueError` raised at `peft/tuners/lora/model.py:_create_new_module`",
    "x = torch.randn(2, 3, device='cuda:0')  # fe80 is not an address here",
    "see https://github.com/huggingface/peft/issues/3129#issuecomment-1234567890",
])
def test_ordinary_ml_code_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == [], text
    assert scrub(text, names=NO_NAMES).text == text


def test_high_entropy_strings_are_flagged_not_scrubbed() -> None:
    from bot.scrub import high_entropy
    key = fake(ALNUM, 40)
    text = f'client = Client(credential="{key}")\nmodel_id = "google/gemma-4-e2b-it"\n'
    flags = high_entropy(text)
    assert [f.line for f in flags] == [1] and key not in flags[0].preview
    assert high_entropy('tokenizer.pad_token = "<pad>"\nx = "q_proj"\n') == []


# --- issue #28: only what the user wrote may be filed ------------------------------------------
import base64  # noqa: E402

from bot.scrub import local_users, secret_env_values, strip_controls, uncertain_strings  # noqa: E402

SHA = fake(HEX, 40)


@pytest.mark.parametrize("text", [
    f"transformers @ git+https://github.com/huggingface/transformers@{SHA}",
    f"peft @ git+https://github.com/huggingface/peft.git@{SHA}",
    "x = torch.randn(2, device='cuda:0')", "connect to localhost:29500", "init_method='tcp://127.0.0.1:29500'",
    "see https://huggingface.co/docs/transformers and huggingface.co/models",
    'AutoModelForCausalLM.from_pretrained("google/gemma-3-1b-it")',
    'AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B-Instruct")',
    'pipeline("fill-mask", model="bert-base-uncased")', "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
    "ssh://git@github.com/huggingface/peft.git", "x = threading.local()", "self.local.value = 1",
    "/data/datasets/alpaca/train.json", "/mnt/c/Windows/System32", "/scratch/checkpoints/run1/x.bin",
    "/work/main/bot/scrub.py", "--hash=sha256:" + fake(HEX, 64), f"commit {SHA}", f"revision='{SHA}'",
    "~/.cache/huggingface/hub/models--google--gemma/snapshots/" + SHA + "/config.json",
    "Qwen2_5_VLForConditionalGeneration, MistralForSequenceClassification2024",
    "tokenizer.pad_token = tokenizer.eos_token\tTOKENIZERS_PARALLELISM=false",
])
def test_issue_28_look_alikes_stay(text: str) -> None:
    assert find_secrets(text, environ={}) == [], text
    assert scrub(text, names=NO_NAMES, environ={}).text == text
    assert uncertain_strings(text) == [], text


def test_url_user_part_is_a_credential_on_any_host() -> None:
    tok = fake(ALNUM, 32)
    for text in (f"--index-url https://{tok}@10.1.2.3/simple", f"https://{tok}@pypi.acme.example/simple",
                 f"https://bob:{tok}@host/simple", f"PIP_INDEX_URL=https://{GHP}@172.20.4.9/x"):
        result = scrub(text, names=NO_NAMES, environ={})
        assert_gone(tok if GHP not in text else GHP, result.text)
        assert result.secrets and find_secrets(text, environ={})


@pytest.mark.parametrize("encoded", [
    base64.b64encode(f"user:{GHP}".encode()).decode(), base64.b64encode(HF.encode()).decode(),
    base64.urlsafe_b64encode(f"mlops:{fake(ALNUM, 14)}".encode()).decode(), f"okafor:{GHP}".encode().hex(),
])
def test_base64_and_hex_of_a_credential_are_secrets(encoded: str) -> None:
    text = f"print(creds) -> b'{encoded}'"
    result = scrub(text, names=NO_NAMES, environ={})
    assert_gone(encoded, result.text) and "<redacted:encoded_secret>" in result.text
    assert kinds(find_secrets(text, environ={})) == ["encoded_secret"]


def test_token_split_over_labelled_lines_and_escaped_breaks() -> None:
    for sep in ("\n", "\\n", "\\\\n"):
        text = f"token part 1: {GHP[:20]}{sep}token part 2: {GHP[20:]} done"
        result = scrub(text, names=NO_NAMES, environ={})
        assert GHP[:20] not in result.text and GHP[20:] not in result.text and "done" in result.text
        assert "split across lines" in find_secrets(text, environ={})[0].preview


def test_bare_keys_fail_closed() -> None:
    hexkey, b64key = fake(HEX, 40), fake(ALNUM + "+/", 40)
    for text in (f"ValueError: bad key '{hexkey}'", f"ValueError: bad key '{b64key}'"):
        result = scrub(text, names=NO_NAMES, environ={})
        assert result.secrets and hexkey not in result.text and b64key not in result.text
    # No word says what a bare 40-hex is: a commit or a key. Kept, and reported as uncertain.
    text = f"ok\nRuntimeError: unexpected value '{hexkey}'"
    assert scrub(text, names=NO_NAMES, environ={}).text == text
    [flag] = uncertain_strings(text)
    assert flag.kind == "uncertain_string" and flag.line == 2 and hexkey not in flag.preview


def test_secret_env_values_by_name() -> None:
    env = {"ACME_SERVICE_TOKEN": "plainvalue-123", "DB_PASSWORD": "hunter2hunter2", "GITHUB_PAT": "x" * 20,
           "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "TOKENIZERS_PARALLELISM": "false", "GIT_AUTHOR_NAME": "Jane Doe Smith",
           "PWD": "/home/jane/project", "MY_KEY": "true", "HOME": "/home/jane"}
    assert set(secret_env_values(env)) == {"plainvalue-123", "hunter2hunter2", "x" * 20}


def test_environment_values_are_scrubbed_in_every_encoding_and_split() -> None:
    import urllib.parse
    value = "p@ss/" + fake(ALNUM, 14)
    env = {"ACME_PROXY_PASSWORD": value}
    for form in (value, base64.b64encode(value.encode()).decode(), value.encode().hex(),
                 urllib.parse.quote(value, safe=""), base64.b64encode(b"u:" + value.encode()).decode()):
        text = f"login with {form} failed"
        result = scrub(text, names=NO_NAMES, environ=env)
        assert form not in result.text and result.secrets, form
        assert all(value not in str(f) and form not in str(f) for f in result.findings)
    split = f"secret part 1: {value[:9]}\nsecret part 2: {value[9:]}\n"
    result = scrub(split, names=NO_NAMES, environ=env)
    assert value[:9] not in result.text and value[9:] not in result.text
    # Without that environment, nothing about the value is known.
    assert scrub(f"login with {value[5:]} failed", names=NO_NAMES, environ={}).findings == []


def test_scrub_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SERVICE_TOKEN", "qwertyuiopasdfgh")
    assert "qwertyuiopasdfgh" not in scrub("as qwertyuiopasdfgh", names=NO_NAMES).text
    assert find_secrets("as qwertyuiopasdfgh")


@pytest.mark.parametrize("text,expected", [
    ("/home/x/src/transformers-fork/src/transformers/models/llama/modeling_llama.py",
     "<src>/transformers/models/llama/modeling_llama.py"),
    (f"transformers @ git+https://github.com/jdoe-private/transformers@{SHA}",
     f"transformers @ git+https://github.com/<private-org>/transformers@{SHA}"),
    ('AutoModelForCausalLM.from_pretrained("myorg/internal-llama-7b")',
     'AutoModelForCausalLM.from_pretrained("<private-org>/<model>")'),
    ("404 for url: https://huggingface.co/api/models/myorg/internal-llama-7b/revision/main",
     "404 for url: https://huggingface.co/api/models/<private-org>/<model>/revision/main"),
    ('load_dataset("acme/private-chats")', 'load_dataset("<private-org>/<dataset>")'),
    ("/data/li/llama-ft/adapter_config.json", "/data/<user>/llama-ft/adapter_config.json"),
    ("/mnt/home/bob/hf_cache/hub", "~/hf_cache/hub"),
    ("/scratch/ochen/runs/x.json", "/scratch/<user>/runs/x.json"),
    ("HTTPSConnectionPool(host='artifacts.internal.acme.net', port=443)", "HTTPSConnectionPool(host='<host>', port=443)"),
    ("ConnectionRefusedError: dgxbox.local:29500", "ConnectionRefusedError: <host>:29500"),
    ("MLFLOW_TRACKING_URI=https://mlflow.corp.acme.com/api", "MLFLOW_TRACKING_URI=https://<host>/api"),
])
def test_issue_28_private_details(text: str, expected: str) -> None:
    result = scrub(text, names=NO_NAMES, environ={})
    assert result.text == expected
    assert result.findings and not result.secrets


def test_a_short_local_user_name_is_scrubbed_as_a_path_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.scrub as scrub_mod
    monkeypatch.setattr(scrub_mod.getpass, "getuser", lambda: "li")
    monkeypatch.setenv("USER", "li")
    monkeypatch.delenv("USERNAME", raising=False)
    assert local_users() == ("li",)
    assert scrub("saved to /srv/ml/li/out.bin; a list is fine", environ={}).text == \
        "saved to /srv/ml/<user>/out.bin; a list is fine"


def test_strip_controls() -> None:
    text = ("\x1b[31mred\x1b[0m \x1b]8;;https://evil.example/\x07link\x1b]8;;\x07 bell\x07 "
            "report\u202egpj.exe \u2066x\u2069\r\nnext\rover\ttab\x00")
    assert strip_controls(text) == "red link bell reportgpj.exe x\nnext\nover\ttab"
    result = scrub(text, names=NO_NAMES, environ={})
    assert result.text == strip_controls(text) and kinds(result.findings) == ["control_characters"]
    assert scrub(result.text, names=NO_NAMES, environ={}).findings == []


# --- issue #39: privacy beyond secrets, and what detect-secrets used to find ------------------
@pytest.mark.parametrize("text,expected", [
    ("remote=[gpu-node-17.acme-research.net]:29500", "remote=[<host>]:29500"),
    ("MlflowException: API request to https://mlflow.acme-research.net/api/2.0/mlflow/runs/create failed",
     "MlflowException: API request to https://<host>/api/2.0/mlflow/runs/create failed"),
    ("MASTER_ADDR=gpu-node-17 MASTER_PORT=29500", "MASTER_ADDR=<host> MASTER_PORT=29500"),
    ("{'MASTER_ADDR': '34.90.12.7'}", "{'MASTER_ADDR': '<ip>'}"),
    ("ConnectionRefusedError: trainbox.acme-research.io:8265", "ConnectionRefusedError: <host>:8265"),
    ("NCCL WARN Connect to gpu-node-18<45678> failed", "NCCL WARN Connect to <host><45678> failed"),
    ("slurmstepd: error: *** JOB 42 ON gpu-node-017 CANCELLED AT 2025-01-01", "slurmstepd: error: *** JOB 42 ON <host> CANCELLED AT 2025-01-01"),
    ("SLURM_JOB_NODELIST=gpu-node-[017-020]", "SLURM_JOB_NODELIST=<host>"),
    ("wandb: View run at https://wandb.ai/okaforlab/gemma-lora/runs/x1y2", "wandb: View run at https://wandb.ai/<entity>/<project>/runs/x1y2"),
    ("wandb: Currently logged in as: amara (okafor-team). Use", "wandb: Currently logged in as: <user> (<entity>). Use"),
    ("https://www.comet.com/acme/llama-sft/0f3a", "https://www.comet.com/<workspace>/<project>/0f3a"),
    ('wandb.init(entity="acme-ml", project="rlhf-internal")', 'wandb.init(entity="<entity>", project="<project>")'),
    ("s3://acme-ckpt/llama/step-500", "s3://<bucket>/llama/step-500"),
    ("gs://acme-data/chat.jsonl and az://acmeblob/ckpt", "gs://<bucket>/chat.jsonl and az://<bucket>/ckpt"),
    ("https://acme-ckpt.s3.us-east-1.amazonaws.com/a.bin", "https://<bucket>.s3.us-east-1.amazonaws.com/a.bin"),
    ("https://s3.amazonaws.com/acme-ckpt/a.bin", "https://s3.amazonaws.com/<bucket>/a.bin"),
    ("https://storage.googleapis.com/acme-data/x.jsonl", "https://storage.googleapis.com/<bucket>/x.jsonl"),
    ('s3.download_file(Bucket="acme-raw", Key="k")', 's3.download_file(Bucket="<bucket>", Key="k")'),
    ("https://acmestore.blob.core.windows.net/c", "https://<tenant>.blob.core.windows.net/c"),
    ("https://adb-123.azuredatabricks.net/api", "https://<tenant>.azuredatabricks.net/api"),
    ("RefreshError for trainer@acme-prod.iam.gserviceaccount.com", "RefreshError for <service-account>"),
    ("403 projects/acme-prod/secrets/hf-token/versions/1", "403 projects/<project>/secrets/hf-token/versions/1"),
    ("OSError: acmeml/llama-ft is not a local folder and is not a valid model identifier",
     "OSError: <private-org>/<model> is not a local folder and is not a valid model identifier"),
    ("Can't load tokenizer for 'acmeml/llama-ft'.", "Can't load tokenizer for '<private-org>/<model>'."),
    ("hub/models--acmeml--llama-ft/snapshots/main", "hub/models--<private-org>--<model>/snapshots/main"),
])
def test_where_a_persons_runs_live_is_scrubbed(text: str, expected: str) -> None:
    result = scrub(text, names=NO_NAMES, environ={})
    assert result.text == expected
    assert result.findings and not result.secrets
    assert scrub(result.text, names=NO_NAMES, environ={}).findings == []  # idempotent


@pytest.mark.parametrize("text", [
    "see https://wandb.ai/site and https://docs.wandb.ai/guides/track", "connect to api.wandb.ai:443",
    "HTTPSConnectionPool(host='huggingface.co', port=443)", "https://cdn-lfs.hf.co/repos/x", "pypi.org:443",
    "[INFO|trainer.py:2241] >> Running training", "accelerate.utils.other:123 warning", "torch/nn/functional.py:2233",
    "client = Client(host=args.host)", 'os.environ["MASTER_ADDR"] = args.master', "MASTER_ADDR: str = field()",
    "MASTER_ADDR=localhost MASTER_PORT=29500", "x = model.to('cuda:0'); y = worker3.model.to",
    "gpu0.memory.allocated grew", "hf://datasets/HuggingFaceFW/fineweb", "the bucket is empty", "project_dir = 'out'",
    "https://s3.amazonaws.com", "~/.cache/huggingface/hub/models--google--gemma-3-1b-it/snapshots",
    "OSError: google/gemma-3-1b-it is not a local folder", "You are logged in.", "db.example.com:5432",
    'HOST = "192.0.2.1"', "MASTER_ADDR=203.0.113.7",
])
def test_public_places_and_code_stay(text: str) -> None:
    assert scrub(text, names=NO_NAMES, environ={}).text == text


KEY40 = fake(HEX, 40)


@pytest.mark.parametrize("text", [
    f'wandb.login("{KEY40}")', f"$ wandb login --relogin {KEY40}", f"machine api.wandb.ai login x password {KEY40}",
    f"wandb: {KEY40}", f"WANDB_API_KEY={KEY40}", f'{{"WANDB_API_KEY": "{KEY40}"}}', "wandb: " + KEY40[:16],
])
def test_a_wandb_key_is_a_secret_by_what_precedes_it(text: str) -> None:
    result = scrub(text, names=NO_NAMES, environ={})
    assert KEY40[:12] not in result.text and result.secrets


@pytest.mark.parametrize("text", [
    f"commit {KEY40}", f"HEAD is now at {KEY40[:7]} fix", f'snapshot_download("google/gemma", revision="{KEY40}")',
    f"sha256 {KEY40}", f"Revision: {KEY40[:16]}",
])
def test_a_commit_or_a_revision_is_not_a_secret(text: str) -> None:
    assert scrub(text, names=NO_NAMES, environ={}).text == text
    assert find_secrets(text, environ={}) == [] and uncertain_strings(text) == []


@pytest.mark.parametrize("text,value", [
    ('db_password = "correct horse battery"', "correct horse battery"),
    ('config = {"api_key": "plainvalue-xyz"}', "plainvalue-xyz"),
    ("if 'letmein123' == password:", "letmein123"),
    ('private_key "s3cr3t-value";', "s3cr3t-value"),
    ("cloudant_password: " + fake(HEX, 64), None),
    ("ibm_cloud_iam_api_key = " + fake(ALNUM + "_-", 44), None),
    ('aws_key = "' + fake(ALNUM, 40) + '"', None),
    ("//registry.npmjs.org/:_authToken=" + "0f3a9b2c-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "0f3a9b2c-1d2e-4f5a-8b9c-0d1e2f3a4b5c"),
    ("PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPrivate-Lines: 1\nAAAAgQC" + fake(ALNUM, 40) + "\n\nafter",
     "AAAAgQC"),
])
def test_rules_that_were_detect_secrets_are_reprobots_own(text: str, value: str | None) -> None:
    result = scrub(text, names=NO_NAMES, environ={})
    assert result.secrets, text
    secret = value or text.rsplit(" ", 1)[-1].strip('"')
    assert secret not in result.text
    assert find_secrets(result.text, environ={}) == []


@pytest.mark.parametrize("text", [
    'password = "<your password>"', "api_key = os.environ['API_KEY']", 'secret = ""', "if password == other:",
    'tokenizer.pad_token = "<pad>"', "client_secret_file = args.path",
])
def test_keyword_look_alikes_stay(text: str) -> None:
    assert scrub(text, names=NO_NAMES, environ={}).text == text
