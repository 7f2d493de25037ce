/**
 * Helpers for testing code built on noetic-effect.
 *
 * @since 0.1.0
 */
export {}
