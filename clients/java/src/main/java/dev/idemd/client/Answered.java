package dev.idemd.client;

/**
 * An answer and when the send that got it began ({@link Clocks} nanoseconds): the instant the
 * durations in the answer count from, since the server counts them from its handling of that very
 * send (a re-send is a call of its own, and an abandoned send's reply is never read).
 */
record Answered<T>(T response, long sentAt) {}
