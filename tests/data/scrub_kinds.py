"""The scrub corpus: secrets and personal details as real ML scripts leak them.

Each ``Kind`` is a fake value, the text it typically appears in, and the environment variable a
run would read it from. Every value is assembled at import time from a documented prefix and
random characters (fixed seed), so no token-shaped literal is ever committed: secret scanners
would flag this file, and so would reprobot's own scrubber.

Used by tests/test_scrub_pipeline.py, which plants every kind in the five places a value can
leave through (an exception message, printed output, a string constant that survives reduction,
a frame path, the run's environment) and checks that none of them is in anything that leaves.
"""
from __future__ import annotations

import base64
import random
import re
import string
import urllib.parse
from dataclasses import dataclass, field

_rng = random.Random(20240917)

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def fake(chars: str, n: int) -> str:
    return "".join(_rng.choice(chars) for _ in range(n))


def digits(n: int) -> str:
    return str(_rng.randint(1, 9)) + fake(string.digits, n - 1)


def _b64(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


def _pem(label: str, lines: int = 3, *, escaped: bool = False) -> str:
    nl = "\\n" if escaped else "\n"
    body = nl.join(fake(B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----{nl}{body}{nl}-----END {label}-----"


# --- personal names: distinctive, so a match is a leak and never a coincidence ---------------
USER_NAME = "tdelacroix" + digits(2)            # the machine's user: home folder, $USER, $LOGNAME
LINUX_USER = "amara.okafor" + digits(2)
MAC_USER = "jlindqvist" + digits(2)
WINDOWS_USER = "Siobhan Nakagawa" + digits(2)
WSL_USER = "rpadmanabhan" + digits(2)


@dataclass(frozen=True)
class Kind:
    name: str
    value: str                  # what must never leave
    appears: str                # how it typically appears (holds ``value``)
    secret: bool                # a credential (filing refuses while one is present), else a private detail
    env_var: str                # the variable a run reads it from (script B)
    env_text: str = ""          # what that variable holds (default: ``appears`` for private details and
                                # self-contained texts, the value for tokens)
    needles: tuple[str, ...] = field(default=())  # further private pieces (the user part of a URL, ...)
    # Recognisable only because the person's environment holds it under a secret-looking name
    # (it has no shape of its own): script A's run sets the variable too.
    env_only: bool = False

    def env_value(self) -> str:
        return self.env_text or self.value

    def pieces(self) -> list[str]:
        """What must not be found where text leaves: the value, its private parts and, for long
        values, every 12-character window of the private part (the needles, else the value): a value
    cut, wrapped or half-scrubbed still leaks."""
        out = [self.value, *self.needles]
        for text in self.needles or (self.value,):
            # a PEM block's BEGIN/END lines name the kind of key: public; its body is the secret
            for part in re.split(r"-----(?:BEGIN|END) [A-Z ]+-----|\\n|\s", text):
                if len(part) >= 24:
                    out += [part[i:i + 12] for i in range(0, len(part) - 11, 6)]
        return list(dict.fromkeys(p for p in out if p))


def _k(name: str, value: str, appears: str, env_var: str, *, secret: bool = True, env_text: str = "",
       needles: tuple[str, ...] = (), env_only: bool = False) -> Kind:
    assert value in appears.replace("{v}", value), name
    return Kind(name, value, appears.replace("{v}", value), secret, env_var,
                env_text.replace("{v}", value), needles, env_only)


def _kinds() -> list[Kind]:
    ks: list[Kind] = []
    add = ks.append

    # --- GitHub -----------------------------------------------------------------------------
    add(_k("github_classic_pat", "gh" + "p_" + fake(ALNUM, 36),
           'g = Github(auth=Auth.Token("{v}"))', "GH_TOKEN"))
    add(_k("github_fine_grained_pat", "github" + "_pat_" + fake(ALNUM, 22) + "_" + fake(ALNUM, 59),
           "403 Forbidden: Resource not accessible by personal access token {v}", "GITHUB_PAT"))
    add(_k("github_oauth_token", "gh" + "o_" + fake(ALNUM, 36),
           "gh auth status: Logged in to github.com account (oauth_token: {v})", "GH_OAUTH_TOKEN"))
    add(_k("github_app_user_token", "gh" + "u_" + fake(ALNUM, 36),
           "user-to-server token {v} has expired", "GH_APP_USER_TOKEN"))
    add(_k("github_app_installation_token", "gh" + "s_" + fake(ALNUM, 36),
           "git clone https://x-access-token:{v}@github.com/acme-ml/private-adapters.git",
           "GH_INSTALLATION_TOKEN"))
    add(_k("github_refresh_token", "gh" + "r_" + fake(ALNUM, 76),
           "refresh_token={v}&grant_type=refresh_token", "GH_REFRESH_TOKEN"))

    # --- Hugging Face ---------------------------------------------------------------------
    add(_k("hf_user_token", "h" + "f_" + fake(ALNUM, 34),
           'huggingface_hub.login(token="{v}")', "HF_TOKEN"))
    add(_k("hf_org_token", "api" + "_org_" + fake(ALNUM, 34),
           "HfApi(token='{v}').whoami()", "HUGGING_FACE_HUB_TOKEN"))
    add(_k("hf_token_in_git_url", "h" + "f_" + fake(ALNUM, 34),
           "git push https://okafor-lab:{v}@huggingface.co/okafor-lab/gemma-lora main", "HF_GIT_TOKEN"))

    # --- LLM APIs -------------------------------------------------------------------------
    add(_k("openai_legacy_key", "s" + "k-" + fake(ALNUM, 48),
           'openai.api_key = "{v}"', "OPENAI_API_KEY"))
    add(_k("openai_project_key", "s" + "k-proj-" + fake(URLSAFE, 74) + "T3Blbk" + "FJ" + fake(URLSAFE, 74),
           'client = OpenAI(api_key="{v}")', "OPENAI_PROJECT_KEY"))
    add(_k("openai_service_account_key", "s" + "k-svcacct-" + fake(URLSAFE, 60),
           "openai.AuthenticationError: Incorrect API key provided: {v}", "OPENAI_SVC_KEY"))
    add(_k("anthropic_key", "s" + "k-ant-api03-" + fake(URLSAFE, 93) + "AA",
           'anthropic.Anthropic(api_key="{v}")', "ANTHROPIC_API_KEY"))
    add(_k("groq_key", "gs" + "k_" + fake(ALNUM, 52),
           "groq.AuthenticationError: invalid key {v}", "GROQ_API_KEY"))
    add(_k("replicate_token", "r" + "8_" + fake(ALNUM, 37),
           "replicate: 401 Unauthorized for {v}", "REPLICATE_API_TOKEN"))
    add(_k("google_api_key", "AI" + "za" + fake(URLSAFE, 35),
           'genai.configure(api_key="{v}")', "GOOGLE_API_KEY"))
    add(_k("azure_openai_key", fake(HEX, 32),
           'AzureOpenAI(api_key="{v}", api_version="2024-02-01")', "AZURE_OPENAI_API_KEY"))

    # --- cloud --------------------------------------------------------------------------------
    add(_k("aws_access_key_id", "AK" + "IA" + fake(UPPER, 16),
           "aws_access_key_id={v}", "AWS_ACCESS_KEY_ID"))
    add(_k("aws_temporary_key_id", "AS" + "IA" + fake(UPPER, 16),
           "botocore.exceptions.ClientError: InvalidAccessKeyId: The AWS Access Key Id {v} does not exist",
           "AWS_TEMP_ACCESS_KEY_ID"))
    add(_k("aws_secret_access_key", fake(B64, 40),
           'boto3.client("s3", aws_secret_access_key="{v}")', "AWS_SECRET_ACCESS_KEY"))
    add(_k("aws_session_token", "IQoJb3JpZ2luX2Vj" + fake(B64, 300),
           "AWS_SESSION_TOKEN={v}", "AWS_SESSION_TOKEN"))
    add(_k("gcp_service_account_private_key", _pem("PRIVATE " + "KEY", 4, escaped=True),
           '{"type": "service_account", "private_key": "{v}\\n", "client_email": "trainer@acme-ml.iam.gserviceaccount.com"}',
           "GCP_SA_PRIVATE_KEY"))
    add(_k("azure_storage_account_key", fake(B64, 86) + "==",
           "DefaultEndpointsProtocol=https;AccountName=mlartifacts;AccountKey={v};EndpointSuffix=core.windows.net",
           "AZURE_STORAGE_CONNECTION_STRING",
           env_text="DefaultEndpointsProtocol=https;AccountName=mlartifacts;AccountKey={v};"
                    "EndpointSuffix=core.windows.net"))
    add(_k("azure_sas_signature", fake(B64, 43) + "%3D",
           "https://mlartifacts.blob.core.windows.net/ckpt/adapter.safetensors?sv=2022-11-02&sp=r&sig={v}",
           "AZURE_BLOB_SAS_URL",
           env_text="https://mlartifacts.blob.core.windows.net/ckpt/adapter.safetensors?sv=2022-11-02&sp=r&sig={v}"))
    add(_k("databricks_token", "da" + "pi" + fake(HEX, 32),
           'WorkspaceClient(host="https://adb-1.azuredatabricks.net", token="{v}")', "DATABRICKS_TOKEN"))
    add(_k("digitalocean_token", "do" + "p_v1_" + fake(HEX, 64),
           "doctl auth init --access-token {v}", "DIGITALOCEAN_ACCESS_TOKEN"))

    # --- experiment trackers ------------------------------------------------------------------
    add(_k("wandb_api_key", fake(HEX, 40), 'wandb.login(key="{v}")', "WANDB_API_KEY"))
    add(_k("comet_api_key", fake(ALNUM, 25), 'comet_ml.init(api_key="{v}")', "COMET_API_KEY"))
    add(_k("neptune_api_token", _b64('{"api_address":"https://app.neptune.ai","api_key":"' + fake(HEX, 36) + '"}'),
           'neptune.init_run(project="acme/ft", api_token="{v}")', "NEPTUNE_API_TOKEN"))
    add(_k("kaggle_key", fake(HEX, 32),
           '{"username":"okaforlab","key":"{v}"}', "KAGGLE_JSON", env_text='{"username":"okaforlab","key":"{v}"}'))

    # --- chat, mail, payments -----------------------------------------------------------------
    add(_k("slack_bot_token", "xo" + "xb-" + digits(12) + "-" + digits(13) + "-" + fake(ALNUM, 24),
           'WebClient(token="{v}")', "SLACK_BOT_TOKEN"))
    add(_k("slack_user_token", "xo" + "xp-" + digits(12) + "-" + digits(12) + "-" + digits(13) + "-" + fake(HEX, 32),
           "slack_sdk.errors.SlackApiError: invalid_auth for {v}", "SLACK_USER_TOKEN"))
    hook = "T" + fake(UPPER, 8) + "/B" + fake(UPPER, 10) + "/" + fake(ALNUM, 24)
    add(_k("slack_webhook", "https://hooks." + "slack.com/services/" + hook,
           'requests.post("{v}", json={"text": "training finished"})', "SLACK_WEBHOOK_URL",
           needles=(hook,)))
    hook = digits(19) + "/" + fake(URLSAFE, 68)
    add(_k("discord_webhook", "https://discord.com/api/" + "webhooks/" + hook,
           "DiscordWebhook(url='{v}').execute()", "DISCORD_WEBHOOK", needles=(hook,)))
    add(_k("discord_bot_token", "M" + fake(ALNUM, 25) + "." + fake(URLSAFE, 6) + "." + fake(URLSAFE, 38),
           'client.run("{v}")', "DISCORD_BOT_TOKEN"))
    add(_k("telegram_bot_token", digits(10) + ":AA" + fake(URLSAFE, 33),
           "https://api.telegram.org/bot{v}/sendMessage?chat_id=1", "TELEGRAM_BOT_TOKEN"))
    add(_k("twilio_api_key", "S" + "K" + fake(HEX, 32),
           'Client("{v}", api_secret, account_sid)', "TWILIO_API_KEY"))
    add(_k("twilio_auth_token", fake(HEX, 32), "TWILIO_AUTH_TOKEN={v}", "TWILIO_AUTH_TOKEN"))
    add(_k("sendgrid_key", "S" + "G." + fake(URLSAFE, 22) + "." + fake(URLSAFE, 43),
           "SendGridAPIClient('{v}').send(message)", "SENDGRID_API_KEY"))
    add(_k("mailgun_key", "ke" + "y-" + fake(HEX, 32),
           'requests.post(MAILGUN_URL, auth=("api", "{v}"), data=report)', "MAILGUN_API_KEY"))
    add(_k("mailchimp_key", fake(HEX, 32) + "-us21", 'MailchimpMarketing.Client({"api_key": "{v}"})',
           "MAILCHIMP_API_KEY"))
    add(_k("stripe_live_secret", "s" + "k_live_" + fake(ALNUM, 99), 'stripe.api_key = "{v}"', "STRIPE_SECRET_KEY"))
    add(_k("stripe_restricted_key", "r" + "k_live_" + fake(ALNUM, 99),
           "stripe.error.AuthenticationError: Invalid API Key provided: {v}", "STRIPE_RESTRICTED_KEY"))
    add(_k("shopify_token", "shp" + "at_" + fake(HEX, 32), "X-Shopify-Access-Token: {v}", "SHOPIFY_ACCESS_TOKEN"))

    # --- package registries and code hosts ------------------------------------------------------
    add(_k("npm_token", "np" + "m_" + fake(ALNUM, 36), "//registry.npmjs.org/:_authToken={v}", "NPM_TOKEN"))
    add(_k("pypi_token", "py" + "pi-AgEIcHlwaS5vcmc" + fake(URLSAFE, 70),
           "twine upload -u __token__ -p {v} dist/*", "TWINE_PASSWORD"))
    add(_k("gitlab_pat", "gl" + "pat-" + fake(URLSAFE, 20), "PRIVATE-TOKEN: {v}", "GITLAB_TOKEN"))

    # --- generic credentials ----------------------------------------------------------------
    add(_k("jwt", "ey" + "J" + fake(URLSAFE, 30) + ".ey" + "J" + fake(URLSAFE, 60) + "." + fake(URLSAFE, 43),
           "401 Unauthorized: token {v} is expired", "ID_TOKEN"))
    add(_k("bearer_header", fake(ALNUM, 40), 'headers = {"Authorization": "Bearer {v}"}', "INFERENCE_AUTH_TOKEN"))
    add(_k("basic_auth_header", _b64("mlops:" + fake(ALNUM, 14)), "Authorization: Basic {v}", "PROXY_AUTHORIZATION"))
    add(_k("x_api_key_header", fake(ALNUM, 40), 'headers={"x-api-key": "{v}"}', "GATEWAY_API_KEY"))
    add(_k("password_kwarg", "Tr0ub4dor&3-" + fake(ALNUM, 6),
           'psycopg2.connect(host="db", user="ml", password="{v}")', "DB_PASSWORD"))
    user, pw = "alice.w" + digits(2), "s3cr3t-" + fake(ALNUM, 10)
    add(_k("url_credentials", user + ":" + pw, "https://{v}@git.example.com/team/models.git", "GIT_REMOTE_URL",
           env_text="https://{v}@git.example.com/team/models.git", needles=(user, pw)))
    user, pw = "mlflow_rw" + digits(2), fake(ALNUM, 18)
    add(_k("database_url", user + ":" + pw, "postgresql://{v}@db.example.com:5432/mlflow", "MLFLOW_BACKEND_STORE_URI",
           env_text="postgresql://{v}@db.example.com:5432/mlflow", needles=(user, pw)))
    pw = fake(ALNUM, 24)
    add(_k("redis_url_password", pw, "redis://:{v}@cache.example.com:6379/0", "CELERY_BROKER_URL",
           env_text="redis://:{v}@cache.example.com:6379/0"))
    add(_k("rsa_private_key", _pem("RSA PRIVATE " + "KEY"), "{v}", "DEPLOY_KEY"))
    add(_k("openssh_private_key", _pem("OPENSSH PRIVATE " + "KEY"), "{v}", "SSH_PRIVATE_KEY"))
    add(_k("ec_private_key", _pem("EC PRIVATE " + "KEY", 2), "{v}", "SIGNING_KEY"))
    add(_k("env_assigned_secret", fake(ALNUM, 28), "export MLFLOW_TRACKING_PASSWORD={v}", "MLFLOW_TRACKING_PASSWORD"))

    # --- personal details -----------------------------------------------------------------
    add(_k("email", "amara.okafor+ml@" + "okafor-lab.org", "run owner: {v}", "RUN_OWNER_EMAIL", secret=False))
    add(_k("email_in_author_line", "t.delacroix@" + "acme-research.fr", "Author: T. Delacroix <{v}>",
           "GIT_AUTHOR_EMAIL", secret=False))
    add(_k("private_ipv4_10", "10." + str(_rng.randint(20, 250)) + ".7." + str(_rng.randint(20, 250)),
           "MASTER_ADDR={v}", "MASTER_ADDR", secret=False))
    add(_k("private_ipv4_172", "172." + str(_rng.randint(16, 31)) + ".5." + str(_rng.randint(20, 250)),
           "torch.distributed: connect to {v}:29500 timed out", "PEER_ADDR", secret=False))
    add(_k("private_ipv4_192", "192.168." + str(_rng.randint(2, 250)) + "." + str(_rng.randint(20, 250)),
           "base_url='http://{v}:8000/v1'", "VLLM_HOST", secret=False))
    add(_k("ipv6_unique_local", "fd" + fake(HEX, 2) + ":" + fake(HEX, 4) + ":" + fake(HEX, 4) + "::" + fake(HEX, 3),
           "listening on [{v}]:29500", "NCCL_PEER_ADDR6", secret=False))
    add(_k("ipv6_link_local", "fe80::" + fake(HEX, 4) + ":" + fake(HEX, 4) + ":" + fake(HEX, 4) + ":" + fake(HEX, 4),
           "peer {v}%eth0 unreachable", "LINK_PEER", secret=False))
    add(_k("linux_home", LINUX_USER, "/home/{v}/datasets/chats/train.jsonl", "HF_HOME", secret=False,
           env_text="/home/{v}/.cache/huggingface"))
    add(_k("macos_home", MAC_USER, "/Users/{v}/Library/Caches/huggingface/hub", "TRANSFORMERS_CACHE",
           secret=False, env_text="/Users/{v}/Library/Caches/huggingface/hub"))
    add(_k("windows_home", WINDOWS_USER,
           "C:\\Users\\{v}\\AppData\\Local\\Programs\\Python\\Python311\\python.exe", "CUDA_PATH",
           secret=False, env_text="C:\\Users\\{v}\\AppData\\Local\\NVIDIA\\CUDA\\v12.1",
           needles=tuple(WINDOWS_USER.split())))
    add(_k("wsl_home", WSL_USER, "/mnt/c/Users/{v}/Downloads/adapter_model.safetensors", "HF_HUB_CACHE",
           secret=False, env_text="/mnt/c/Users/{v}/hf-cache"))
    add(_k("drive_path", "AcmeClient" + digits(3) + "Data", "E:\\{v}\\checkpoints\\step-500\\adapter.bin",
           "CKPT_DIR", secret=False, env_text="E:\\{v}\\checkpoints"))
    add(_k("internal_host_cluster", "gpu-node-" + digits(2) + ".dgx.cluster.local",
           "RendezvousConnectionError: {v}:29400", "RDZV_HOST", secret=False))
    add(_k("internal_host_ec2", "ip-10-0-" + digits(2) + "-" + digits(2) + ".ec2.internal",
           "NCCL WARN Connect to {v}<45678> failed", "NCCL_HOST", secret=False))
    add(_k("internal_host_corp", "mlflow.research" + digits(2) + ".corp",
           "MlflowException: API request to https://{v}/api/2.0/mlflow/runs/create failed",
           "MLFLOW_TRACKING_URI", secret=False, env_text="https://{v}"))
    add(_k("machine_user_name", USER_NAME, "run by {v} on the shared box", "RUN_BY", secret=False))

    # --- found by the red-team pass of issue #28 -------------------------------------------
    # A token as the user part of a URL, no password: an index URL in the lock line, System Info.
    tok = fake(ALNUM, 40)
    add(_k("token_as_url_user_on_ip", tok, "--index-url https://{v}@10.1.2.3/simple/", "REPROBOT_INDEX_URL",
           env_text="https://{v}@10.1.2.3/simple/"))
    tok = "gh" + "p_" + fake(ALNUM, 36)
    add(_k("github_token_as_url_user", tok, "remote: https://{v}@172.20.4.9/acme-ml/peft.git", "GIT_MIRROR_URL",
           env_text="https://{v}@172.20.4.9/acme-ml/peft.git"))
    user, pw = "ci-bot" + digits(2), fake(ALNUM, 30)
    add(_k("url_user_password_index", user + ":" + pw, "PIP_INDEX_URL=https://{v}@pypi.acme-ml.example/simple",
           "PIP_INDEX_URL", env_text="https://{v}@pypi.acme-ml.example/simple", needles=(user, pw)))
    # base64 of a token: printed bytes of base64.b64encode(b"user:ghp_..."), a bare encoded token.
    add(_k("base64_of_user_and_token", _b64("okafor:" + "gh" + "p_" + fake(ALNUM, 36)), "b'{v}'",
           "ENCODED_GIT_CREDS"))
    add(_k("base64_of_hf_token", _b64("h" + "f_" + fake(ALNUM, 34)),
           "ValueError: cannot parse credentials {v}", "HF_CREDS_BLOB"))
    # A token split over two labelled lines.
    tok = "gh" + "p_" + fake(ALNUM, 36)
    add(_k("token_split_over_labelled_lines", tok[:20], "token part 1: {v}\ntoken part 2: " + tok[20:],
           "TOKEN_PARTS", env_text="token part 1: {v}\ntoken part 2: " + tok[20:], needles=(tok[:20], tok[20:])))
    # Bare 40-character keys in a message.
    add(_k("bare_hex_key_in_message", fake(HEX, 40), "ValueError: bad key '{v}'", "LICENSE_BLOB",
           env_text="ValueError: bad key '{v}'"))
    add(_k("bare_base64_key_in_message", fake(B64, 40), "ValueError: bad key '{v}'", "SIGNING_BLOB",
           env_text="ValueError: bad key '{v}'"))
    add(_k("bare_random_string", fake(ALNUM, 40), "RuntimeError: handshake refused for {v}", "HANDSHAKE_ID"))
    # Values of the person's secret-named variables, with no shape of their own, and their encodings.
    add(_k("env_secret_plain", fake(string.ascii_lowercase, 24), "connecting to the gateway as {v} failed",
           "ACME_SERVICE_TOKEN", env_only=True))
    raw = "hunter-" + fake(string.ascii_lowercase, 12)
    add(_k("env_secret_base64", _b64(raw), "b'{v}'", "ACME_DB_PASSWORD", env_text=raw, needles=(_b64(raw), raw),
           env_only=True))
    raw = fake(string.ascii_lowercase, 16)
    add(_k("env_secret_hex", raw.encode().hex(), "digest input: {v}", "ACME_API_KEY", env_text=raw,
           needles=(raw.encode().hex(), raw), env_only=True))
    raw = "p@ss/" + fake(string.ascii_lowercase, 8) + "#" + fake(string.ascii_lowercase, 8)
    quoted = urllib.parse.quote(raw, safe="")
    add(_k("env_secret_urlencoded", quoted, "GET https://proxy.example.com/login?user=ml&pw={v} failed",
           "ACME_PROXY_PASSWORD", env_text=raw, needles=(quoted, raw), env_only=True))
    raw = fake(string.ascii_lowercase, 24)
    add(_k("env_secret_split_over_lines", raw[:12], "secret part 1: {v}\nsecret part 2: " + raw[12:],
           "ACME_CLIENT_SECRET", env_text=raw, needles=(raw[:12], raw[12:]), env_only=True))
    # Private forks, private Hub repositories, user names in any path, non-public host names.
    fork = "transformers-acmefork" + digits(2)
    add(_k("private_fork_path", fork, "/srv/src/{v}/src/transformers/models/llama/modeling_llama.py",
           "TRANSFORMERS_SRC_FILE", secret=False,
           env_text="/srv/src/{v}/src/transformers/models/llama/modeling_llama.py"))
    owner = "okafor-private" + digits(2)
    add(_k("private_fork_git_url", owner,
           "transformers @ git+https://github.com/{v}/transformers.git@" + fake(HEX, 40), "FORK_PIN", secret=False,
           env_text="transformers @ git+https://github.com/{v}/transformers.git@" + fake(HEX, 40)))
    repo = "acmeml" + digits(2) + "/internal-llama-7b"
    add(_k("private_hub_repo_id", repo, 'AutoModelForCausalLM.from_pretrained("{v}")', "PRIVATE_MODEL_CALL",
           secret=False, env_text='AutoModelForCausalLM.from_pretrained("{v}")'))
    add(_k("user_in_data_path", "kvyas" + digits(1), "/data/{v}/llama-ft/checkpoint-500/adapter_config.json",
           "CKPT_ROOT", secret=False, env_text="/data/{v}/llama-ft"))
    add(_k("user_in_mnt_home_path", "bnakamura" + digits(2), "/mnt/home/{v}/hf_cache/hub/models--google--gemma",
           "SHARED_CACHE", secret=False, env_text="/mnt/home/{v}/hf_cache"))
    add(_k("user_in_scratch_path", "ochen" + digits(2), "/scratch/{v}/runs/exp1/trainer_state.json",
           "RUN_DIR", secret=False, env_text="/scratch/{v}/runs/exp1"))
    add(_k("internal_label_host", "artifacts.internal.acmeml" + digits(2) + ".net",
           "HTTPSConnectionPool(host='{v}', port=443): Max retries exceeded", "ARTIFACT_HOST", secret=False))
    add(_k("dot_local_host", "dgxbox" + digits(2) + ".local", "ConnectionRefusedError: {v}:29500",
           "RDZV_ENDPOINT", secret=False))

    # --- found by the red-team pass of issue #39 ---------------------------------------------
    # A W&B key is 40 hex with no prefix: what precedes it says what it is (a commit hash does not
    # follow "login", "password" or "wandb").
    add(_k("wandb_key_positional", fake(HEX, 40), 'wandb.login("{v}")', "WANDB_LOGIN_KEY"))
    add(_k("wandb_key_cli", fake(HEX, 40), "$ wandb login --relogin {v}", "WANDB_RELOGIN_KEY"))
    add(_k("wandb_key_netrc", fake(HEX, 40), "machine api.wandb.ai login okafor password {v}", "WANDB_NETRC_KEY"))
    add(_k("wandb_key_after_name", fake(HEX, 40), "wandb: {v}", "WANDB_PRINTED_KEY"))
    add(_k("wandb_server_key", "local-" + fake(HEX, 40), "wandb.login(host=WANDB_HOST, key='{v}')",
           "WANDB_SERVER_KEY"))
    # Company host names under a public suffix: a machine's or a service's first label, or a
    # place only a host can stand (after remote=, before a port, a SLURM node).
    add(_k("company_host_machine", "gpu-node-" + digits(2) + ".acmeresearch" + digits(2) + ".net",
           "torch.distributed.DistNetworkError: Connection reset by peer, remote=[{v}]:29500", "DIST_PEER",
           secret=False))
    add(_k("company_host_service", "mlflow.acmeresearch" + digits(2) + ".net",
           "MlflowException: API request to https://{v}/api/2.0/mlflow/runs/create failed", "MLFLOW_SERVER_NAME",
           secret=False))
    add(_k("company_host_login_node", "login" + digits(1) + ".hpc.acmeuni" + digits(2) + ".edu",
           "MASTER_ADDR={v} MASTER_PORT=29500", "RDZV_LOGIN_NODE", secret=False))
    add(_k("company_host_before_port", "trainbox.acmeresearch" + digits(2) + ".io",
           "ConnectionRefusedError: [Errno 111] {v}:8265 refused", "RAY_HEAD", secret=False, env_text="{v}:8265"))
    add(_k("slurm_node_name", "gpu-node-" + digits(3),
           "slurmstepd: error: *** JOB 4242 ON {v} CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***",
           "SLURMD_NODENAME", secret=False))
    # Experiment trackers: the entity (a person or a team) and the project.
    entity, project = "okaforlab" + digits(2), "gemma-lora-" + fake(string.ascii_lowercase, 6)
    add(_k("wandb_run_url", entity + "/" + project,
           "wandb: View run at https://wandb.ai/{v}/runs/" + fake(LOWER, 8), "WANDB_RUN_URL", secret=False,
           env_text="https://wandb.ai/{v}/runs/x1y2z3", needles=(entity, project)))
    user, team = "amara-ok" + digits(2), "okafor-team" + digits(2)
    add(_k("wandb_logged_in", user + " (" + team + ")",
           "wandb: Currently logged in as: {v}. Use `wandb login --relogin` to force relogin", "WANDB_WHOAMI",
           secret=False, env_text="logged in as: {v}", needles=(user, team)))
    workspace, project = "acmeresearch" + digits(2), "llama-sft-" + fake(string.ascii_lowercase, 5)
    add(_k("comet_experiment_url", workspace + "/" + project,
           "COMET INFO: Experiment is live on comet.com https://www.comet.com/{v}/" + fake(HEX, 32),
           "COMET_EXPERIMENT_URL", secret=False, env_text="https://www.comet.com/{v}", needles=(workspace, project)))
    entity, project = "acmeml" + digits(3), "internal-rlhf-" + fake(string.ascii_lowercase, 5)
    add(_k("tracker_kwargs", entity + '", project="' + project,
           'wandb.init(entity="{v}", config=cfg)', "WANDB_INIT_CALL", secret=False,
           env_text='wandb.init(entity="{v}")', needles=(entity, project)))
    # Storage buckets, cloud accounts and tenants.
    bucket = "acmeresearch-ckpt-" + digits(3)
    add(_k("s3_bucket", bucket, "FileNotFoundError: s3://{v}/llama/step-500/adapter_model.safetensors", "CKPT_URI",
           secret=False, env_text="s3://{v}/llama"))
    bucket = "acmeml-datasets-eu" + digits(2)
    add(_k("gcs_bucket", bucket, "google.api_core.exceptions.NotFound: 404 gs://{v}/chat/train.jsonl", "DATA_URI",
           secret=False, env_text="gs://{v}/chat"))
    bucket = "acmeblob" + digits(3)
    add(_k("azure_container", bucket, "ResourceNotFoundError: az://{v}/ckpts/step-100 not found", "AZ_CKPT_URI",
           secret=False, env_text="az://{v}/ckpts"))
    bucket = "okafor-private-" + digits(3)
    add(_k("s3_bucket_host", bucket, "botocore 403 for https://{v}.s3.us-east-1.amazonaws.com/adapter.bin",
           "CKPT_HTTP_URL", secret=False, env_text="https://{v}.s3.us-east-1.amazonaws.com/adapter.bin"))
    bucket = "acme-raw-chats-" + digits(3)
    add(_k("bucket_kwarg", bucket, 's3.download_file(Bucket="{v}", Key="train.jsonl", Filename="train.jsonl")',
           "DOWNLOAD_CALL", secret=False, env_text='Bucket="{v}"'))
    account = "acmestore" + digits(4)
    add(_k("azure_storage_account", account, "HttpResponseError at https://{v}.blob.core.windows.net/ckpt?comp=list",
           "BLOB_ENDPOINT", secret=False, env_text="https://{v}.blob.core.windows.net/ckpt"))
    sa = "trainer-sa@acmeresearch" + digits(2) + "-prod.iam.gserviceaccount.com"
    add(_k("gcp_service_account", sa, "google.auth.exceptions.RefreshError: invalid_grant for {v}",
           "GOOGLE_SERVICE_ACCOUNT", secret=False))
    proj = "acmeml" + digits(2) + "-prod"
    add(_k("gcp_project", proj, "PermissionDenied: 403 projects/{v}/secrets/hf-token/versions/latest",
           "GCP_RESOURCE_NAME", secret=False, env_text="projects/{v}/secrets/hf-token"))
    # A private Hub repository named by the message, not by a call or a URL.
    repo = "acmeml" + digits(2) + "-internal/llama-7b-chat-ft"
    add(_k("hub_repo_in_message", repo,
           "OSError: {v} is not a local folder and is not a valid model identifier listed on "
           "'https://huggingface.co/models'", "MODEL_ERROR", secret=False, env_text="{v} is not a local folder"))
    owner, name = "okaforlab" + digits(3), "gemma-dpo-" + fake(string.ascii_lowercase, 5)
    add(_k("hub_cache_folder", owner + "--" + name,
           "No such file: .cache/huggingface/hub/models--{v}/snapshots/main/config.json", "HUB_SNAPSHOT",
           secret=False, env_text="hub/models--{v}/snapshots", needles=(owner, name)))

    # Terminal control characters: escape sequences, bells, bidi overrides.
    add(_k("ansi_escape", "\x1b", "\x1b[31mCUDA error\x1b[0m \x1b]8;;https://evil.example/\x07click\x1b]8;;\x07",
           "COLOR_MSG", secret=False, needles=("\x1b", "\x07")))
    add(_k("bidi_override", "\u202e", "saved to report\u202egpj.exe and \u2066x\u2069", "UPLOAD_NAME",
           secret=False, needles=("\u202e", "\u2066", "\u2069")))
    return ks


KINDS: list[Kind] = _kinds()
assert len({k.name for k in KINDS}) == len(KINDS)
assert len({k.env_var for k in KINDS}) == len(KINDS)

SECRET_KINDS = [k for k in KINDS if k.secret]
PRIVATE_KINDS = [k for k in KINDS if not k.secret]
# The person's environment for the env-only kinds: their values are recognisable through it alone.
ENV_ONLY = {k.env_var: k.env_value() for k in KINDS if k.env_only}
