// Building a submission, see submission.h.
#include "submission.h"

#include <stdlib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>

#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"
#include "exercises.h"

namespace fs = std::filesystem;

namespace dtlab::grader {
namespace {

// The compiler's own words: the lines that say error, else the end of the output.
std::string compiler_errors(const std::string& output) {
  std::istringstream in(output);
  std::string errors, tail;
  int count = 0;
  std::string limits;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[dtlab: ", 0) == 0) {  // the grader's own words: a limit stopped the compile (run_compile)
      limits += "    " + line + "\n";
      continue;
    }
    if ((line.find("error") != std::string::npos || line.find("Error:") != std::string::npos) && count < 12) {
      errors += "    " + line + "\n";
      ++count;
    }
    if (!line.empty()) tail = line;
  }
  return (errors.empty() ? "    " + tail + "\n" : errors) + limits;
}

}  // namespace

fs::path submission_tasks_root(const fs::path& submission) {
  if (!fs::is_directory(submission)) throw Error("--submission " + submission.string() + " is not a folder");
  return fs::is_directory(submission / "tasks") ? submission / "tasks" : submission;
}

std::map<std::string, std::string> missing_exercises(const fs::path& submission,
                                                     const std::vector<std::string>& exercises) {
  const fs::path root = fs::absolute(submission_tasks_root(submission));
  std::map<std::string, std::string> missing;
  for (const auto& e : exercises) {
    // An exercise that uses others' answers (exercises.txt's uses=) needs their folders too.
    for (const std::string& folder : exercise(e).folders()) {
      if (!fs::is_directory(root / folder)) {
        missing[e] = folder == e ? fmt::format("the submission has no {}/ folder", (root / e).string())
                                 : fmt::format("the submission has no {}/ folder, which {} compiles with its own (it "
                                               "composes your {} answers)", (root / folder).string(), e, folder);
        break;
      }
    }
  }
  return missing;
}

namespace {

// How much of a submission the grader copies into the compile's folder: more is refused, with
// the bound named.
constexpr uint64_t kMaxSubmissionFiles = 1000;
constexpr uint64_t kMaxSubmissionBytes = 64ull << 20;

// Whether a file name may appear in a shell command unquoted (the build's commands are shell
// lines, see exercise_commands).
bool plain_file_name(const std::string& name) {
  if (name.empty() || name[0] == '-' || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

// Copies the regular files of an exercise's folder (never following a link: a link to
// solutions/ would be read by the grader's user) into `to`; returns its .cpp files (the top
// folder's, as the kit's own build globs them). Throws with the reason for a folder it refuses.
std::vector<std::string> copy_exercise(const fs::path& submission, const fs::path& from, const fs::path& to) {
  // A link anywhere on the way (DIR/tasks -> the kit's solutions/) would have the grader copy
  // what it points to.
  const std::string inside = fs::canonical(submission).string() + "/";
  if (fs::is_symlink(from) || fs::canonical(from).string().rfind(inside, 0) != 0) {
    throw Error(from.string() + " is a link, or lies past one: a submission holds its folders themselves");
  }
  fs::create_directories(to);
  std::vector<std::string> sources;
  uint64_t files = 0, bytes = 0;
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path relative = fs::relative(it->path(), from);
    const fs::file_status st = it->symlink_status();
    if (fs::is_symlink(st)) {
      throw Error(it->path().string() + " is a link: a submission holds its files themselves");
    }
    if (fs::is_directory(st)) {
      fs::create_directories(to / relative);
      continue;
    }
    if (!fs::is_regular_file(st)) continue;
    const uint64_t size = it->file_size();
    if (++files > kMaxSubmissionFiles || (bytes += size) > kMaxSubmissionBytes) {
      throw Error(fmt::format("{} holds more than {} files or {} MiB: more than a submission may", from.string(),
                              kMaxSubmissionFiles, kMaxSubmissionBytes >> 20));
    }
    fs::copy_file(it->path(), to / relative);
    const std::string name = relative.filename().string();
    if (it.depth() == 0 && relative.extension() == ".cpp") {
      if (!plain_file_name(name)) {
        throw Error(it->path().string() + ": name source files with letters, digits, '_', '-' and '.' only");
      }
      sources.push_back(name);
    }
  }
  std::sort(sources.begin(), sources.end());
  return sources;
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Note [Submission commands]: how the instructor's build compiles and links the exercise's own
// program (target T: common/drivers/T_main.cpp and common/exercises/T/ with tasks/T/*.cpp), read
// from its build.ninja with `ninja -t commands T`, which reads and runs nothing else. A submission's files compile with the
// same flags (the kit's include folders, the precompiled header of dtlab_common, which GCC uses
// when the flags match) into the compile's folder, and link with the same driver objects and
// libraries, read where the instructor's build made them. Nothing is written into that build.
struct ExerciseCommands {
  std::string compile;                  // the compile line up to its output and input
  std::vector<std::string> link_words;  // the link line, objects of tasks/T/ left out
  size_t objects_at = 0;                // where the submission's objects go among link_words
  size_t output_at = 0;                 // the word after -o
};

// The folders the compile and link commands read outside the kit's own: LibTorch's headers and
// libraries where they are not under /usr (a pip wheel's venv, in .torch/ of the checkout or
// anywhere), and build/torch-include (Note in cmake/DtlabTorch.cmake: links into the wheel's
// headers, whose targets come too). Named by -I, -isystem, -L, -Wl,-rpath(-link), or a file the
// link reads. Nothing else of the checkout or the build tree: those hold the answers.
std::vector<fs::path> toolchain_folders(const std::vector<std::string>& words, const fs::path& source_dir,
                                        const fs::path& build_dir) {
  std::set<fs::path> folders;
  auto under = [](const fs::path& path, const fs::path& root) {
    const std::string p = path.string(), r = root.string();
    return p == r || p.rfind(r + "/", 0) == 0;
  };
  std::function<void(const std::string&)> add = [&](const std::string& word) {
    if (word.empty() || word[0] != '/') return;
    std::error_code ec;
    fs::path path = fs::weakly_canonical(word, ec);
    if (ec) return;
    if (fs::is_regular_file(path, ec)) path = path.parent_path();
    if (!fs::is_directory(path, ec) || under(path, "/usr") || folders.count(path)) return;
    if (under(path, build_dir)) {
      if (!under(path, build_dir / "torch-include")) return;
      folders.insert(path);
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_symlink(ec)) add(fs::canonical(entry.path(), ec).string());
      }
      return;
    }
    if (under(path, source_dir) && !under(path, source_dir / ".torch")) return;
    folders.insert(path);
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if ((w == "-isystem" || w == "-I" || w == "-L") && i + 1 < words.size()) {
      add(words[i + 1]);
    } else if (w.rfind("-I", 0) == 0 || w.rfind("-L", 0) == 0) {
      add(w.substr(2));
    } else if (w.rfind("-Wl,-rpath", 0) == 0 && w.find(',', 4) != std::string::npos) {
      std::istringstream list(w.substr(w.find(',', 4) + 1));
      for (std::string dir; std::getline(list, dir, ':');) add(dir);
    } else {
      add(w);
    }
  }
  // A folder under another is mounted with it: only the outermost ones (std::set sorts a folder
  // before what it holds).
  std::vector<fs::path> outermost;
  for (const fs::path& f : folders) {
    if (outermost.empty() || !under(f, outermost.back())) outermost.push_back(f);
  }
  return outermost;
}

ExerciseCommands exercise_commands(const fs::path& source_dir, const fs::path& build_dir, const std::string& e) {
  const ProcessResult r = run_process({"ninja", "-C", build_dir.string(), "-t", "commands", e}, 60);
  if (r.exit_code != 0) {
    throw Error(fmt::format("cannot read how {} builds {} (`ninja -C {} -t commands {}`): build the kit with `make "
                            "build` (a Ninja build) first:\n{}", build_dir.string(), e, build_dir.string(), e,
                            compiler_errors(r.output)));
  }
  ExerciseCommands c;
  const std::string task_source = " -c " + (source_dir / "tasks" / e).string() + "/";
  const std::string driver_source = " -c " + (source_dir / "common" / "drivers" / (e + "_")).string();
  const std::string own_objects = "CMakeFiles/" + e + ".dir/";
  std::string driver_compile;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(task_source) != std::string::npos && c.compile.empty()) c.compile = line;
    if (line.find(driver_source) != std::string::npos && driver_compile.empty()) driver_compile = line;
    if (line.rfind(": && ", 0) == 0 && line.find(" -o " + e + " ") != std::string::npos) {
      c.link_words = split_words(line);
    }
  }
  if (c.compile.empty()) c.compile = driver_compile;  // the same flags (dtlab_target_defaults)
  if (c.compile.empty() || c.link_words.empty()) {
    throw Error(fmt::format("`ninja -C {} -t commands {}` names no compile of {} or no link of {}: is {} a build "
                            "of this kit?", build_dir.string(), e, driver_source.substr(4), e, build_dir.string()));
  }
  // The compiler cache's launcher (cmake/ccache_launcher.sh CCACHE BASE STATS COMPILER ...) is
  // left out: a student's compile neither reads nor writes the instructor's cache.
  std::vector<std::string> words = split_words(c.compile);
  if (!words.empty() && fs::path(words[0]).filename() == "ccache_launcher.sh" && words.size() > 4) {
    words.erase(words.begin(), words.begin() + 4);
  }
  // Its output and input: "-MD -MT X -MF X.d -o X -c SRC" at the end.
  const auto cut = std::find_if(words.begin(), words.end(), [](const std::string& w) { return w == "-MD" || w == "-o"; });
  words.erase(cut, words.end());
  c.compile = join_words(words);
  // The link: the exercise's own objects out, every relative path made absolute (it ran in build/).
  std::vector<std::string> link;
  for (size_t i = 0; i < c.link_words.size(); ++i) {
    const std::string& w = c.link_words[i];
    if (w.find(own_objects) != std::string::npos) {
      if (c.objects_at == 0) c.objects_at = link.size();
      continue;
    }
    std::error_code ec;
    if (i > 0 && c.link_words[i - 1] == "-o") {
      c.output_at = link.size();
      link.push_back(w);
    } else if (!w.empty() && w[0] != '-' && w[0] != '/' && fs::exists(build_dir / w, ec)) {
      link.push_back((build_dir / w).string());
    } else {
      link.push_back(w);
    }
  }
  if (c.objects_at == 0) c.objects_at = c.output_at > 0 ? c.output_at - 1 : link.size();
  c.link_words = link;
  return c;
}

}  // namespace

TemporaryFolder::~TemporaryFolder() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

SubmissionBuild build_submission(const fs::path& submission, const std::vector<std::string>& exercises,
                                 const fs::path& source_dir, const fs::path& build_dir, const Sandbox& sandbox) {
  const fs::path root = fs::absolute(submission_tasks_root(submission));
  SubmissionBuild build;
  const std::map<std::string, std::string> missing = missing_exercises(submission, exercises);
  std::vector<std::string> present;
  for (const auto& e : exercises) {
    if (!missing.count(e)) present.push_back(e);
  }
  if (present.empty()) return build;
  const auto started = std::chrono::steady_clock::now();
  fmt::print("grader: building {} from {}\n", fmt::join(present, ", "), root.string());
  std::fflush(stdout);
  // Note [The compile jail] (sandbox.h): a folder of this grading's own, removed when it ends.
  // In bwrap mode it sees, of the kit, only what the compile and the link read: the kit's
  // library sources and headers (common/: no answers there), the library and its precompiled
  // header (build/common/), and each exercise's driver objects and the kit's objects beside them
  // (kit-T: dtlab_task in cmake/Dtlab.cmake). Not solutions/, not what they built (solution-T),
  // not .git, and no results folder, wherever it lies (in the checkout, in build/).
  CompileJail jail;
  open_compile_jail(sandbox, &jail);
  jail.visible = {fs::absolute(source_dir) / "common", fs::absolute(build_dir) / "common"};
  for (const auto& e : present) {
    jail.visible.push_back(fs::absolute(build_dir) / "CMakeFiles" / ("driver-" + e + ".dir"));
    for (const std::string& folder : exercise(e).folders()) {  // the kit's objects its link line names
      const fs::path kit = fs::absolute(build_dir) / "CMakeFiles" / ("kit-" + folder + ".dir");
      if (fs::is_directory(kit)) jail.visible.push_back(kit);
    }
  }
  // Each exercise's sources as (folder, file): its own folder's, then those of the folders it uses.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sources;
  std::map<std::string, std::vector<std::string>> copied;  // a folder copied once, for every exercise
  for (const auto& e : present) {
    for (const std::string& folder : exercise(e).folders()) {
      try {
        if (!copied.count(folder)) copied[folder] = copy_exercise(submission, root / folder, jail.work / "src" / folder);
        if (copied[folder].empty()) {
          build.failures[e] = fmt::format("{}/ holds no .cpp file", (root / folder).string());
          break;
        }
        for (const std::string& name : copied[folder]) sources[e].emplace_back(folder, name);
      } catch (const std::exception& ex) {
        build.failures[e] = ex.what();
        break;
      }
    }
    fs::create_directories(jail.work / "obj" / e);
  }
  fs::create_directories(jail.work / "bin");
  hand_to_compile(jail);
  // The binaries land in a folder of the grader's own, mode 0700, for as long as the grading
  // lasts (build.folder): never where a later submission's compile could read them.
  char name[] = "/tmp/dtlab-binaries-XXXXXX";
  if (!::mkdtemp(name)) throw Error(std::string("cannot make a folder in /tmp for the built binaries: ") + std::strerror(errno));
  build.folder = std::make_shared<TemporaryFolder>(name);
  const fs::path binaries = name;
  for (const auto& e : present) {
    if (build.failures.count(e)) continue;
    const ExerciseCommands commands = exercise_commands(fs::absolute(source_dir), fs::absolute(build_dir), e);
    std::vector<std::string> words = split_words(commands.compile);
    words.insert(words.end(), commands.link_words.begin(), commands.link_words.end());
    for (const fs::path& f : toolchain_folders(words, fs::absolute(source_dir), fs::absolute(build_dir))) {
      if (std::find(jail.visible.begin(), jail.visible.end(), f) == jail.visible.end()) jail.visible.push_back(f);
    }
    std::string failed;
    std::vector<std::string> objects;
    for (const auto& [folder, name] : sources[e]) {
      const std::string object = (jail.work / "obj" / e / (folder + "-" + name + ".o")).string();
      const CompileResult r = run_compile(sandbox, jail, {"/bin/sh", "-c", commands.compile + " -o " + object + " -c " +
                                                          (jail.work / "src" / folder / name).string()});
      if (r.exit_code != 0) {
        failed = fmt::format("{}/ does not compile{}:\n{}", (root / folder).string(),
                             r.timed_out ? fmt::format(" (the compile took more than {:g} s)", sandbox.compile_limits.seconds) : "",
                             compiler_errors(r.output));
        break;
      }
      objects.push_back(object);
    }
    const fs::path binary = jail.work / "bin" / e;
    if (failed.empty()) {
      std::vector<std::string> link = commands.link_words;
      link[commands.output_at] = binary.string();
      link.insert(link.begin() + static_cast<long>(commands.objects_at), objects.begin(), objects.end());
      const CompileResult r = run_compile(sandbox, jail, {"/bin/sh", "-c", join_words(link)});
      // A regular file, not a link the grader's copy below would follow.
      if (r.exit_code != 0 || !fs::is_regular_file(fs::symlink_status(binary))) {
        failed = fmt::format("{}/ does not link{}:\n{}", (root / e).string(), r.timed_out ? " (timed out)" : "",
                             compiler_errors(r.output));
      }
    }
    if (!failed.empty()) {
      // The compiler names the copies: name the student's own files instead.
      for (const std::string& folder : exercise(e).folders()) {
        const std::string copy = (jail.work / "src" / folder).string(), own = (root / folder).string();
        for (size_t at = failed.find(copy); at != std::string::npos; at = failed.find(copy, at + own.size())) {
          failed.replace(at, copy.size(), own);
        }
      }
      build.failures[e] = failed;
      continue;
    }
    // Copied by the grader (the compile's uid keeps no hold on it), readable by the grader only:
    // every run gets a copy of its bytes (Note [The sandbox]).
    fs::copy_file(binary, binaries / e, fs::copy_options::overwrite_existing);
    fs::permissions(binaries / e, fs::perms::owner_all);
    build.binaries[e] = binaries / e;
  }
  fmt::print("grader: built in {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::fflush(stdout);
  return build;
}

}  // namespace dtlab::grader
