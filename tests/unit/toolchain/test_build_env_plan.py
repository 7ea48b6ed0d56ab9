"""Docker command planning: secrets, proxies, find-links staging, torch source, session flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from build_tools import buildkit, env, locks, matrix, options, plan, wheel_names

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
def cpu(repo) -> matrix.Toolchain:
    # the row whose torch is the machine's wheelhouse's CPU build (the main line's is PyPI's)
    return matrix.load(repo / "configs" / "toolchains.toml").toolchain("cpu213")


@pytest.fixture
def host_env(tmp_path) -> dict[str, str]:
    wh1, wh2 = tmp_path / "wh1", tmp_path / "wh2"
    wh1.mkdir()
    wh2.mkdir()
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    return {
        "PIP_FIND_LINKS": f"{wh1} file://{wh2} https://wheels.example/simple {tmp_path / 'missing'}",
        "PIP_INDEX_URL": "https://user:s3cret@mirror.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://tok3n@extra.example/simple",
        "PIP_CERT": str(ca),
        "HTTPS_PROXY": "http://puser:ppass@proxy.example:3128",
        "NO_PROXY": "localhost",
    }


def test_from_environ_reads_every_pass_through(host_env, tmp_path):
    h = env.from_environ(host_env)
    assert h.find_links_dirs == ((tmp_path / "wh1").resolve(), (tmp_path / "wh2").resolve())
    assert h.find_links_urls == ("https://wheels.example/simple",)
    assert h.ca_bundle == (tmp_path / "ca.pem").resolve()
    assert h.proxies == ("HTTPS_PROXY", "NO_PROXY")
    assert any("missing" in w for w in h.warnings)
    described = "\n".join(h.describe())
    assert "s3cret" not in described and "tok3n" not in described and "ppass" not in described


def test_requests_ca_bundle_is_the_fallback_and_a_missing_bundle_is_an_error(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    assert env.from_environ({"REQUESTS_CA_BUNDLE": str(ca)}).ca_bundle == ca.resolve()
    with pytest.raises(env.EnvError, match="PIP_CERT=/nope does not name a file"):
        env.from_environ({"PIP_CERT": "/nope"})
    assert env.from_environ({}).ca_bundle is None


def test_pip_conf_holds_index_find_links_and_cert(host_env):
    h = env.from_environ(host_env)
    conf = env.pip_conf(h, extra_index_urls=["https://download.pytorch.org/whl/cpu"])
    assert "index-url = https://user:s3cret@mirror.example/simple" in conf
    assert "    https://download.pytorch.org/whl/cpu" in conf
    assert "    /wheelhouse/0\n    /wheelhouse/1\n    https://wheels.example/simple" in conf
    assert "cert = /run/secrets/cacert" in conf
    assert "cert" not in env.pip_conf(env.from_environ({}))


def test_redact():
    assert env.redact("https://u:p@h.example:8080/x") == "https://***@h.example:8080/x"
    assert env.redact("https://h.example/x") == "https://h.example/x"


def inputs(tmp_path: Path, host: env.HostEnv, toolchain: matrix.Toolchain) -> plan.BuildInputs:
    return plan.BuildInputs(
        context=tmp_path / "ctx",
        dockerfile=tmp_path / "docker/cpu/Dockerfile",
        builder_image="b:1",
        test_image="t:1",
        pipconf=tmp_path / "secret/pip.conf",
        host=host,
        key="ab" * 32,
        locks=locks.lock_args(toolchain),
    )


def test_build_commands_use_secrets_and_never_carry_credentials(cpu, host_env, tmp_path):
    h = env.from_environ(host_env)
    cmds = plan.plan_build("docker", cpu, inputs(tmp_path, h, cpu), tmp_path / "export")
    assert [c.argv[c.argv.index("--target") + 1] for c in cmds] == ["build", "wheel"]
    for c in cmds:
        line = c.shell()
        assert c.env == {"DOCKER_BUILDKIT": "1"}
        assert "--network host" in line and "--progress plain" in line
        assert f"id=pipconf,src={tmp_path / 'secret/pip.conf'}" in line
        assert f"id=cacert,src={(tmp_path / 'ca.pem').resolve()}" in line
        # proxies by name only (docker reads the value from its environment); no credential anywhere
        assert "--build-arg HTTPS_PROXY " in line and "--build-arg NO_PROXY " in line
        for secret in ("s3cret", "tok3n", "ppass", "BEGIN CERTIFICATE", "mirror.example"):
            assert secret not in line
        assert "--build-arg BUILDER_IMAGE=b:1" in line
        assert "--build-arg PYTHON_VERSION=3.11" in line
        assert "--build-arg BUILDER_LOCK=locks/cpu213-builder-py311.txt" in line
    assert "-t torch-fl/cpu213-builder:abababababab" in cmds[0].shell()
    assert "--label org.torch-fl.key=" + "ab" * 32 in cmds[0].shell()
    assert f"--output type=local,dest={tmp_path / 'export'}" in cmds[1].shell()
    assert cmds[0].argv[-1] == str(tmp_path / "ctx")


def test_exclude_globs_and_build_env_reach_the_build_as_args(cpu, tmp_path):
    args = plan.build_args(cpu, inputs(tmp_path, env.from_environ({}), cpu))
    values = dict(a.split("=", 1) for a in args if "=" in a)
    assert values["AUDITWHEEL_EXCLUDE"].split() == list(cpu.auditwheel_exclude)
    assert "CMAKE_BUILD_PARALLEL_LEVEL=2" in values["BUILD_ENV"].split()
    assert values["VARIANT"] == "cpu"


def test_test_run_command(cpu, host_env, tmp_path):
    h = env.from_environ(host_env)
    site = plan.Site("docker", cpu, "torch-fl/cpu-test:1", tmp_path / "r", h, user="1000:1000")
    c = plan.plan_test_run(site, bench="short", pytest_args=["-k", "add"])
    argv = list(c.argv)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert f"{tmp_path / 'r'}:/reports" in argv
    assert argv[argv.index("--user") + 1] == "1000:1000"
    assert "FLAGOS_ACCELERATOR=cpu" in argv
    assert "--shm-size=1g" in argv
    assert argv[argv.index("--markers") + 1] == cpu.pytest_markers
    assert argv[-3:] == ["--", "-k", "add"]
    assert argv[argv.index("--suites") + 1] == "routing,correctness"
    assert "ppass" not in c.shell() and "-e HTTPS_PROXY" in c.shell()


def test_torch_source_prefers_a_staged_wheel(cpu):
    wheel = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    args, note = wheel_names.torch_source(cpu, [wheel, "numpy-2.0-cp311-cp311-manylinux_2_17_x86_64.whl"])
    assert args == [] and "staged wheelhouse" in note and wheel in note
    args, note = wheel_names.torch_source(cpu, ["torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"])
    assert args == ["--extra-index-url", cpu.torch.index_url]
    args, _ = wheel_names.torch_source(cpu, ["torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"])
    assert args == ["--extra-index-url", cpu.torch.index_url]


def test_requirement_matching():
    ok = wheel_names.requirement_version_matches
    assert ok("torch==2.13.0+cpu", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "cp311")
    assert ok("torch>=2.13,<2.14", "torch-2.13.1-cp311-cp311-manylinux_2_28_x86_64.whl", "cp311")
    assert not ok("torch==2.13.0+cpu", "torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", "cp311")
    assert not ok("torch==2.13.0+cpu", "torch-2.13.0+cpu-cp311-cp311-win_amd64.whl", "cp311")
    assert not ok("torch==2.13.0+cpu", "not-a-wheel.tar.gz", "cp311")


@pytest.mark.parametrize(
    ("posargs", "expected"),
    [
        ([], options.Options()),
        (["--dry-run"], options.Options(dry_run=True)),
        (["--rebuild", "--", "-k", "add", "-x"], options.Options(rebuild=True, tool_args=("-k", "add", "-x"))),
        (["--no-bench"], options.Options(bench="none")),
        (["--bench-full", "--", "--dry-run"], options.Options(bench="full", tool_args=("--dry-run",))),
        (["--", "--", "-k"], options.Options(tool_args=("--", "-k"))),
    ],
)
def test_session_flags_then_a_separator_then_pytest_arguments(posargs, expected):
    assert options.read(posargs, "test", "test-cpu") == expected


@pytest.mark.parametrize(
    ("action", "posargs", "message"),
    [
        ("test", ["--dryrun"], r"test-cpu: unknown argument '--dryrun'; did you mean --dry-run\? \(flags: --dry-run, "),
        (
            "test",
            ["-k", "add"],
            r"unknown argument '-k' .*pytest arguments go after a separator: "
            r"nox -s test-cpu -- \[flags\] -- ARGS",
        ),
        ("build", ["--no-bench"], r"unknown argument '--no-bench' \(flags: --dry-run, --rebuild\)$"),
        ("build", ["--", "-k", "add"], r"test-cpu passes no arguments on: '-k add'"),
        ("test", ["--bench-full", "--no-bench"], r"exclude each other"),
    ],
)
def test_sessions_refuse_what_they_do_not_know(action, posargs, message):
    with pytest.raises(options.UsageError, match=message):
        options.read(posargs, action, "test-cpu")


def test_every_flag_is_declared_once_and_taken_by_a_session():
    names = [f.name for f in options.FLAGS]
    assert len(names) == len(set(names))
    for flag in options.FLAGS:
        assert flag.help and flag.sessions, flag.name
        assert all(flag.name in options.flags_of(action) for action in flag.sessions)
    assert options.flags_of("test") == ("--dry-run", "--rebuild", "--bench-full", "--no-bench")
    assert options.flags_of("install") == ("--dry-run", "--all-pythons")


def test_the_options_read_the_host_environment_once():
    opts = options.read(["--dry-run"], "build", environ={"PIP_INDEX_URL": "https://mirror/simple"})
    assert opts.host.index_url == "https://mirror/simple"
    assert opts.host is opts.host


def test_failed_step_is_found_in_plain_progress():
    log = [
        "#12 [build 3/4] RUN python /opt/torch-fl/scripts/build_wheel.py /src /dist",
        "#12 0.1 build_wheel: ...",
        "#12 DONE 59.4s",
        "#14 [build 4/4] RUN python /opt/torch-fl/scripts/repair_wheel.py /dist /out",
        "#14 1.7 ValueError: patchelf 0.14.3 found.",
        "#14 ERROR: executor failed running [/bin/bash -o pipefail -c python ...]: exit code: 1",
    ]
    assert buildkit.failed_step(log) == "[build 4/4] RUN python /opt/torch-fl/scripts/repair_wheel.py /dist /out"
    assert buildkit.failed_step(["no steps here"]) is None


def test_history_leak_detection(host_env):
    h = env.from_environ(host_env)
    markers = env.secret_markers(h, host_env)
    clean = "RUN /bin/sh -c pip install torch # buildkit\n<missing> Imported from -"
    assert env.history_leaks(clean, markers) == []
    assert env.history_leaks("COPY ca.pem\n" + CA, markers) == ["a CA certificate"]
    assert env.history_leaks("ARG P=http://puser:ppass@proxy.example:3128", markers) == [
        "the password in HTTPS_PROXY",
        "the value of HTTPS_PROXY",
    ]
    assert env.history_leaks("|1 PIP_INDEX_URL=https://user:s3cret@mirror", markers) == ["a pip index password"]
    assert env.history_leaks("https://tok3n@extra.example", markers) == ["a pip index token"]
