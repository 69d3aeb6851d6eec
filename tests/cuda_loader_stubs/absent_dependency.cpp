// A library the stubs link, built under a soname no file has: loading such a stub fails the way a module
// whose dependency is not installed does.
extern "C" __attribute__((visibility("default"))) int unet_test_absent_dependency() {
  return 42;
}
