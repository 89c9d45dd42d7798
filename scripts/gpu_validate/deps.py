"""Dependency discovery on a GPU machine with no package registry: unpacks the Debian packages carried in
.deps/ (scripts/fetch-gpu-deps) into a prefix and makes their CMake configs usable from there; finds the
toolchain (CMake 3.25+, a C++20 compiler, nvcc) and cuBLAS, cuBLASLt, cuDNN and CUPTI wherever they are
(the CUDA toolkit, the system, PyTorch's nvidia-* wheels).

discover() adds two report subsections and two checks ("carried Debian packages", "toolchain and CUDA
libraries") to the Record and returns a Deps: the configure arguments that point CMake at the prefix and
the libraries, and the environment (LD_LIBRARY_PATH, PATH) every later command runs with. The prefix is
BUILD/deps-prefix, kept while the .debs are the same (a second call on a warm machine reuses the build);
libraries outside the toolkit get links in BUILD/lib-shim and BUILD/include-shim. A dry run unpacks nothing.
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from tables import header_version, libraries_table

ARCH_DIR = "usr/lib/x86_64-linux-gnu"
LIBRARIES = (("cudart", "cuda_runtime_api.h"), ("cublas", "cublas_v2.h"), ("cublasLt", "cublasLt.h"),
             ("cupti", "cupti.h"), ("cudnn", "cudnn.h"))
# Explicit package dirs: CMake only searches lib/<arch>/cmake where it knows the library architecture.
PACKAGE_DIRS = (("spdlog", f"{ARCH_DIR}/cmake/spdlog"), ("fmt", f"{ARCH_DIR}/cmake/fmt"),
                ("CLI11", "usr/share/cmake/CLI11"), ("doctest", "usr/lib/cmake/doctest"),
                ("nlohmann_json", "usr/share/cmake/nlohmann_json"))


@dataclass
class Deps:
    cmake: str = "cmake"
    cxx: str = ""
    generator: str = "Unix Makefiles"
    keep_going: list = field(default_factory=lambda: ["-k"])
    cmake_args: list = field(default_factory=list)
    cuda_root: str = ""
    prefix: str = ""
    prefix_libs: str = ""
    lib_path: dict = field(default_factory=dict)   # library -> the file built against
    env: dict = field(default_factory=lambda: dict(os.environ))
    ok: bool = True


def capture(cmd, timeout=30, env=None):
    """stdout + stderr of a short query; "" when it cannot run."""
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def first_line(text):
    return text.splitlines()[0] if text.strip() else ""


# ---- the Debian packages carried in .deps/ ----

def unpack_one(deb, prefix):
    """Whether `deb` was unpacked into `prefix` (dpkg-deb -x, else ar + tar: a .deb is an ar archive
    holding data.tar.{xz,zst,gz})."""
    try:
        if shutil.which("dpkg-deb"):
            return subprocess.run(["dpkg-deb", "-x", deb, prefix], timeout=120).returncode == 0
        with tempfile.TemporaryDirectory() as tmp:
            if subprocess.run(["ar", "x", deb], cwd=tmp, timeout=60).returncode != 0:
                return False
            data = glob.glob(os.path.join(tmp, "data.tar.*"))
            return bool(data) and subprocess.run(["tar", "-xf", data[0], "-C", prefix], timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def unpack(record, debs, prefix, dry_run):
    """Unpacks `debs` into `prefix` once per set of packages; the names of those that failed."""
    want = "".join(f"{os.path.basename(d)} {os.path.getsize(d)}\n" for d in debs)
    stamp = os.path.join(prefix, ".unpacked")
    if os.path.exists(stamp) and open(stamp).read() == want:
        record.say(f"`.deps` already unpacked into `{prefix}` (same packages).")
        return []
    if dry_run:
        record.say(f"Dry run: would unpack {len(debs)} .deb files into `{prefix}` with `dpkg-deb -x`.")
        return []
    shutil.rmtree(prefix, ignore_errors=True)
    os.makedirs(prefix)
    failed = [os.path.basename(deb) for deb in debs if not unpack_one(deb, prefix)]
    if not failed:
        with open(stamp, "w") as f:
            f.write(want)
    return failed


def fix_cmake_configs(record, prefix, deps):
    """Debian's configs hard-code /usr: doctest's targets are rewritten, OpenBLAS gets a config of its own."""
    doctest = os.path.join(prefix, "usr/lib/cmake/doctest/doctestTargets.cmake")
    if os.path.isfile(doctest):
        text = open(doctest).read()
        fixed = re.sub(r'^set\(_IMPORT_PREFIX "/usr"\)$', f'set(_IMPORT_PREFIX "{prefix}/usr")', text, flags=re.M)
        with open(doctest, "w") as f:
            f.write(fixed)
        if f'set(_IMPORT_PREFIX "{prefix}/usr")' in fixed:
            record.say(f"doctestTargets.cmake: `_IMPORT_PREFIX` rewritten from `/usr` to `{prefix}/usr`.")
        else:
            deps.ok = False
            record.add("carried Debian packages", "fail", "doctestTargets.cmake: could not rewrite its hard-coded /usr prefix",
                       ran=True)
    # The alternatives links OpenBLAS's postinst makes do not exist after dpkg -x.
    blas = os.path.join(prefix, ARCH_DIR, "openblas-pthread/libopenblas.so")
    if os.path.exists(blas):
        d = os.path.join(prefix, "strata-cmake/OpenBLAS")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "OpenBLASConfig.cmake"), "w") as f:
            f.write(f'set(OpenBLAS_VERSION "0.3.21")\n'
                    f'set(OpenBLAS_INCLUDE_DIRS "{prefix}/usr/include/x86_64-linux-gnu/openblas-pthread")\n'
                    f'set(OpenBLAS_LIBRARIES "{blas}")\n')
        deps.cmake_args.append(f"-DOpenBLAS_DIR={d}")
    others = []
    for path in glob.glob(os.path.join(prefix, "usr", "**", "*.cmake"), recursive=True):
        if re.search(r"/cmake/(fmt|spdlog)/|openblas/OpenBLASConfig\.cmake$|doctestTargets\.cmake$", path):
            continue  # fmt's and spdlog's only name /usr when loaded through /usr itself
        if re.search(r'"/usr[/"]|[ (]/usr/', open(path, errors="replace").read()):
            others.append(os.path.relpath(path, prefix))
    if others:
        record.say("Warning: CMake files in the prefix that still name /usr: " + " ".join(sorted(others)))


def carried_packages(record, build, deps_dir, dry_run, deps):
    record.say("\n### Carried Debian packages (.deps)\n")
    debs = sorted(glob.glob(os.path.join(deps_dir, "*.deb")))
    if not debs:
        record.say("No `.deps/*.deb`: using the system's packages (run scripts/fetch-gpu-deps on Debian 12 and carry .deps).")
        record.add("carried Debian packages", "skip", "no .deps/*.deb; relying on system packages")
        return
    prefix = deps.prefix = os.path.join(build, "deps-prefix")
    names = [os.path.basename(d).split("_")[0] for d in debs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # two versions of one package would be unpacked over each other
        deps.ok = False
        record.add("carried Debian packages", "fail",
                   f"two versions of: {' '.join(dup)} in .deps (rerun scripts/fetch-gpu-deps)", ran=True)
    failed = unpack(record, debs, prefix, dry_run)
    if failed:
        deps.ok = False
        record.add("carried Debian packages", "fail", "could not unpack: " + " ".join(failed), ran=True)
    manifest = os.path.join(deps_dir, "MANIFEST")
    record.say(f"Packages (`.deps/MANIFEST`), unpacked into `{prefix}`:")
    record.block(open(manifest).read() if os.path.exists(manifest) else "\n".join(map(os.path.basename, debs)))
    if os.path.isdir(prefix):
        fix_cmake_configs(record, prefix, deps)
    deps.cmake_args += [f"-D{name}_DIR={prefix}/{sub}" for name, sub in PACKAGE_DIRS
                        if os.path.isdir(os.path.join(prefix, sub))]
    deps.cmake_args.append(f"-DCMAKE_PREFIX_PATH={prefix}/usr")
    deps.prefix_libs = f"{prefix}/{ARCH_DIR}:{prefix}/{ARCH_DIR}/openblas-pthread"
    # cmake / ninja if they were carried; the system's win
    deps.env["PATH"] = deps.env.get("PATH", "") + f":{prefix}/usr/bin"
    if deps.ok:
        record.add("carried Debian packages", "pass", f"{len(debs)} .deb from .deps in {prefix}", ran=True)


# ---- the toolchain and the CUDA libraries ----

def version_at_least(text, minimum):
    nums = [int(x) for x in re.findall(r"\d+", text)[:2]]
    return len(nums) == 2 and tuple(nums) >= minimum


def toolchain(deps, problems):
    """CMake 3.25+, a C++20 compiler, the generator; the CMake version."""
    deps.cmake = shutil.which("cmake", path=deps.env.get("PATH")) or ""
    deps.cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or ""
    if shutil.which("ninja", path=deps.env.get("PATH")):
        deps.generator, deps.keep_going = "Ninja", ["-k", "0"]
    version = ""
    if not deps.cmake:
        problems.append("cmake not found (carry it: scripts/fetch-gpu-deps --toolchain)")
    else:
        version = (first_line(capture([deps.cmake, "--version"], 20)).split() + [""] * 3)[2]
        if not version_at_least(version, (3, 25)):
            problems.append(f"cmake {version} is older than 3.25")
    compiles = False
    if deps.cxx:
        try:
            compiles = subprocess.run([deps.cxx, "-std=c++20", "-x", "c++", "-", "-o", os.devnull],
                                      input="int main() { return 0; }", text=True, timeout=60,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        except (OSError, subprocess.SubprocessError):
            pass
    if not compiles:
        problems.append("no C++20 compiler (g++ 11 or newer)")
    return version


def find_cuda_root():
    nvcc = shutil.which("nvcc")
    candidates = [os.environ.get(v, "") for v in ("CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT")]
    candidates += ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-13*"))
    candidates.append(os.path.dirname(os.path.dirname(nvcc)) if nvcc else "")
    for c in candidates:
        if c and os.access(os.path.join(c, "bin", "nvcc"), os.X_OK):
            return os.path.abspath(c)  # /usr/local/cuda as named, not the versioned folder it links to
    return ""


def wheel_roots(python):
    """PyTorch's nvidia-* pip wheels: site-packages/nvidia/<lib>/{include,lib}, nvidia/cu13/{include,lib}."""
    paths = capture([python, "-c", "import site, sys\n"
                     "for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)"], 30)
    roots = []
    for d in sorted(set(paths.splitlines())):
        for r in sorted(glob.glob(os.path.join(d, "nvidia", "*"))):
            if os.path.isdir(os.path.join(r, "lib")) and r not in roots:
                roots.append(r)
    return roots


def search_roots(cuda_root, wheels):
    """Where each library may live, in order of preference: (label, include dir, lib dir)."""
    roots = []
    if cuda_root:
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            if os.path.isdir(os.path.join(cuda_root, sub)):
                roots.append(("toolkit", f"{cuda_root}/include", f"{cuda_root}/{sub}"))
                break
        if os.path.isdir(f"{cuda_root}/extras/CUPTI/lib64"):
            roots.append(("toolkit CUPTI", f"{cuda_root}/extras/CUPTI/include", f"{cuda_root}/extras/CUPTI/lib64"))
    roots += [("system", "/usr/include", "/usr/lib/x86_64-linux-gnu"),
              ("system", "/usr/include/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"),
              ("system", "/usr/local/include", "/usr/local/lib")]
    roots += [("wheel " + r.split("site-packages/", 1)[-1], f"{r}/include", f"{r}/lib") for r in wheels]
    return roots


def lib_file(libdir, name):
    """libdir/libNAME.so, else the first libdir/libNAME.so.<major>..."""
    plain = os.path.join(libdir, f"lib{name}.so")
    if os.path.exists(plain):
        return plain
    versioned = sorted(glob.glob(plain + ".[0-9]*"))
    return versioned[0] if versioned else ""


def find_libraries(roots, log):
    """{name: (file, include dir, label)} of the first copy of each library whose headers are there too."""
    found = {}
    for name, header in LIBRARIES:
        log.append(f"lib{name} (header {header}):")
        shown = set()
        for label, inc, libdir in roots:
            f = lib_file(libdir, name)
            if not f or os.path.realpath(f) in shown:
                continue
            shown.add(os.path.realpath(f))
            has_header = os.path.isfile(os.path.join(inc, header))
            log.append(f"    {label}: {os.path.realpath(f)} "
                       f"({'headers ' + header_version(name, inc) if has_header else 'no header'})")
            if name not in found and has_header:
                found[name] = (f, inc, label)
        if name not in found:
            log.append("    (none with headers)")
    return found


def shim_headers(build, cuda_root, name, inc):
    """Headers from a folder that also holds CUDA headers of another version (a wheel's nvidia/cu13/include)
    must not shadow the toolkit's: such a library gets a folder of links to its own headers only."""
    if not cuda_root or inc == f"{cuda_root}/include" or not os.path.exists(os.path.join(inc, "cuda_runtime_api.h")):
        return inc
    d = os.path.join(build, "include-shim", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for e in os.listdir(inc):
        if not os.path.exists(os.path.join(cuda_root, "include", e)):
            os.symlink(os.path.join(inc, e), os.path.join(d, e))
    return d


def library_path(build, deps, roots, found):
    """LD_LIBRARY_PATH: the toolkit's libraries first (its cudart and cuBLAS must win), then links to the
    libraries the toolkit lacks (so a wheel folder never shadows the toolkit's cudart), then the .debs'."""
    shim = os.path.join(build, "lib-shim")
    shutil.rmtree(shim, ignore_errors=True)
    os.makedirs(shim)
    dirs = [libdir for label, _, libdir in roots if label.startswith("toolkit")] if deps.cuda_root else []
    patterns = {"cudnn": ["libcudnn*.so*"], "cupti": ["libcupti.so*", "libnvperf*.so*", "libpcsamplingutil*.so*",
                                                         "libcheckpoint*.so*"]}
    used = False
    for name, (f, _, label) in found.items():
        if label.startswith("toolkit"):
            continue
        for pattern in patterns.get(name, [f"lib{name}.so*"]):
            for g in glob.glob(os.path.join(os.path.dirname(f), pattern)):
                target = os.path.join(shim, os.path.basename(g))
                if os.path.lexists(target):
                    os.remove(target)
                os.symlink(g, target)
                used = True
    if used:
        dirs.append(shim)
    if deps.prefix_libs:
        dirs.append(deps.prefix_libs)
    old = deps.env.get("LD_LIBRARY_PATH", "")
    deps.env["LD_LIBRARY_PATH"] = ":".join(dirs + ([old] if old else []))


def cuda_cmake_args(record, build, deps, found):
    """What the build reads (cmake/StrataCuda.cmake, CMake's FindCUDAToolkit): STRATA_CUDNN_LIBRARY/_INCLUDE;
    CUDA_<lib>_LIBRARY and CUDAToolkit_CUPTI_INCLUDE_DIR for libraries outside the toolkit."""
    if deps.cuda_root:
        deps.cmake_args += [f"-DCMAKE_CUDA_COMPILER={deps.cuda_root}/bin/nvcc", f"-DCUDAToolkit_ROOT={deps.cuda_root}"]
    extra = []
    for name in ("cublas", "cublasLt", "cupti"):
        if name not in found or found[name][2].startswith("toolkit"):
            continue
        f, inc, _ = found[name]
        deps.cmake_args.append(f"-DCUDA_{name}_LIBRARY={f}")
        inc = shim_headers(build, deps.cuda_root, name, inc)
        if name == "cupti":
            deps.cmake_args.append(f"-DCUDAToolkit_CUPTI_INCLUDE_DIR={inc}")
        else:
            extra.append(inc)
    if extra:  # CUDA::cublas only carries the toolkit's include dir: the wheel's headers for every compile
        deps.cmake_args += [f"-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES={';'.join(extra)}",
                            f"-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES={';'.join(extra)}"]
    if "cudnn" in found:
        f, inc, _ = found["cudnn"]
        deps.cmake_args += [f"-DSTRATA_CUDNN_LIBRARY={f}",
                            f"-DSTRATA_CUDNN_INCLUDE={shim_headers(build, deps.cuda_root, 'cudnn', inc)}"]
        if "cu12" in f:
            record.say("Warning: this cuDNN comes from a CUDA 12 wheel; strata is built with the CUDA 13 toolkit.")


def cuda_libraries(record, build, python, deps, problems):
    deps.cuda_root = find_cuda_root()
    if not deps.cuda_root:
        problems.append("no CUDA toolkit with nvcc (looked in $CUDA_HOME, /usr/local/cuda*, PATH)")
    wheels = wheel_roots(python)
    roots = search_roots(deps.cuda_root, wheels)
    log = [f"CUDA toolkit: {deps.cuda_root or 'not found'}"]
    if deps.cuda_root:
        log += capture([f"{deps.cuda_root}/bin/nvcc", "--version"], 20).splitlines()[-2:]
    log.append("pip nvidia wheels: " + (" ".join(wheels) or "none"))
    found = find_libraries(roots, log)
    with open(os.path.join(record.work, "logs", "cuda_libraries.log"), "w") as f:
        f.write("\n".join(log) + "\n")
    record.block("\n".join(log))
    problems += [f"lib{name} with {header}" for name, header in LIBRARIES if name not in found]
    deps.lib_path = {name: f for name, (f, _, _) in found.items()}
    library_path(build, deps, roots, found)
    cuda_cmake_args(record, build, deps, found)
    rows = [(name, os.path.realpath(found[name][0]), found[name][2], found[name][1]) if name in found
            else (name, "", "", "") for name, _ in LIBRARIES]
    record.say(libraries_table(rows))


def compilers(deps):
    """The C++ compiler's and nvcc's versions, for the detail of a failed configure or build: the GPU machine
    may carry a newer g++ than Debian 12's, which can reject what Debian's accepts (spdlog/fmt, CLI11)."""
    cxx = first_line(capture([deps.cxx, "--version"], 10)) if deps.cxx else "no C++ compiler"
    nvcc = re.search(r"release [0-9.]+", capture([os.path.join(deps.cuda_root, "bin", "nvcc") if deps.cuda_root
                                                  else "nvcc", "--version"], 10))
    return f"{cxx or 'C++ compiler did not answer'}; nvcc {nvcc.group(0) if nvcc else 'not found'}"


def discover(record, build, deps_dir, python, dry_run):
    deps = Deps()
    carried_packages(record, build, deps_dir, dry_run, deps)
    record.say("\n### Toolchain and CUDA libraries\n")
    problems = []
    cmake_version = toolchain(deps, problems)
    cuda_libraries(record, build, python, deps, problems)
    record.say(f"\nGenerator: {deps.generator}; compiler: `{deps.cxx or 'none'}`; "
               f"LD_LIBRARY_PATH=`{deps.env.get('LD_LIBRARY_PATH', '')}`")
    if problems:
        for p in problems:
            record.say(f"- missing: {p}")
        record.add("toolchain and CUDA libraries", "fail", "; ".join(problems), ran=True)
        deps.ok = False
    else:
        record.add("toolchain and CUDA libraries", "pass", f"cmake {cmake_version}, {compilers(deps)}", ran=True)
    return deps
