/* Built as shlibdeps-placeholders/libcudnn.so.9, never installed: see CPackConfig.cmake. */
int unet_cudnn_placeholder(void);
int unet_cudnn_placeholder(void) {
  return 0;
}
