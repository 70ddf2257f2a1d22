// Validate SDF files with libsdformat (sdf::Root::Load), as Gazebo would parse them.
// Built by test/test_core_sdf.py:  g++ sdf_validate.cpp $(pkg-config --cflags --libs sdformat12)
// Usage: sdf_validate FILE...   prints each error; exit 0 when every file loads cleanly.
// Strict: warnings, unrecognized and deprecated elements are errors too.
// For each valid file it prints: "ok FILE worlds=N models=M" (models of the first world).
#include <iostream>
#include <sdf/sdf.hh>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE.sdf..." << std::endl;
    return 2;
  }
  sdf::ParserConfig config;
  config.SetWarningsPolicy(sdf::EnforcementPolicy::ERR);
  config.SetUnrecognizedElementsPolicy(sdf::EnforcementPolicy::ERR);
  config.SetDeprecatedElementsPolicy(sdf::EnforcementPolicy::ERR);
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    sdf::Root root;
    sdf::Errors errors = root.Load(argv[i], config);
    if (!errors.empty()) {
      ++failed;
      for (const auto &e : errors) {
        std::cout << "error " << argv[i] << ": " << e.Message() << std::endl;
      }
      continue;
    }
    std::size_t models = 0;
    if (root.WorldCount() > 0) {
      models = root.WorldByIndex(0)->ModelCount();
    } else if (root.Model() != nullptr) {
      models = 1;
    }
    std::cout << "ok " << argv[i] << " worlds=" << root.WorldCount() << " models=" << models
              << std::endl;
  }
  return failed == 0 ? 0 : 1;
}
