package dev.idemd.client;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy in front of idemd that can lose replies, as {@code clients/python/tests/proxy.py}
 * does. {@link #dropNextReply()}: the next HTTP/2 response (its HEADERS frame, sent once the server
 * handled the call) is never forwarded; the connection is cut instead, as a network that lost the
 * reply would. {@link #delayReplies}: the next responses (one each, in the order the server sends
 * them) are held that long; what follows them on the connection waits too. {@link #cut()} closes
 * every connection and refuses new ones until {@link #restore()}.
 */
final class TestProxy implements AutoCloseable {
  private static final int HEADERS = 0x1;

  private final int upstreamPort;
  private final ServerSocket listener;
  private final Set<Socket> sockets = Collections.synchronizedSet(new HashSet<>());
  private final AtomicInteger dropsArmed = new AtomicInteger();
  private final AtomicInteger dropped = new AtomicInteger();
  private final AtomicInteger delayed = new AtomicInteger();
  private final Deque<Long> delays = new ArrayDeque<>();
  private volatile boolean refusing;
  private volatile long connectDelayMillis;
  private volatile boolean closed;

  TestProxy(int upstreamPort) throws IOException {
    this.upstreamPort = upstreamPort;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread accept = new Thread(this::accept, "test-proxy-accept");
    accept.setDaemon(true);
    accept.start();
  }

  String address() {
    return "127.0.0.1:" + listener.getLocalPort();
  }

  void dropNextReply() {
    dropsArmed.incrementAndGet();
  }

  int dropped() {
    return dropped.get();
  }

  int delayed() {
    return delayed.get();
  }

  void delayReplies(long... millis) {
    synchronized (delays) {
      for (long each : millis) {
        delays.add(each);
      }
    }
  }

  void connectDelay(long millis) {
    connectDelayMillis = millis;
  }

  void cut() {
    refusing = true;
    closeAll();
  }

  void restore() {
    refusing = false;
    connectDelayMillis = 0;
  }

  @Override
  public void close() {
    closed = true;
    try {
      listener.close();
    } catch (IOException ignored) {
      // closing anyway
    }
    closeAll();
  }

  private void closeAll() {
    synchronized (sockets) {
      for (Socket socket : sockets) {
        quietlyClose(socket);
      }
      sockets.clear();
    }
  }

  private static void quietlyClose(Socket socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // already gone
    }
  }

  private void accept() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException stopped) {
        return;
      }
      Thread handler = new Thread(() -> handle(client), "test-proxy-conn");
      handler.setDaemon(true);
      handler.start();
    }
  }

  private void handle(Socket client) {
    if (refusing) {
      quietlyClose(client);
      return;
    }
    if (connectDelayMillis > 0) {
      TestServer.sleep(connectDelayMillis);
    }
    Socket upstream;
    try {
      upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
    } catch (IOException refused) {
      quietlyClose(client);
      return;
    }
    sockets.add(client);
    sockets.add(upstream);
    Thread requests =
        new Thread(
            () -> {
              try {
                client.getInputStream().transferTo(upstream.getOutputStream());
              } catch (IOException ignored) {
                // either side closed
              }
              quietlyClose(upstream);
            },
            "test-proxy-requests");
    requests.setDaemon(true);
    requests.start();
    try {
      replies(upstream.getInputStream(), client.getOutputStream(), client, upstream);
    } catch (IOException ignored) {
      // either side closed
    } finally {
      quietlyClose(client);
      quietlyClose(upstream);
      sockets.remove(client);
      sockets.remove(upstream);
    }
  }

  /** Server to client, frame by frame, so that a response can be dropped whole. */
  private void replies(InputStream from, OutputStream to, Socket client, Socket upstream)
      throws IOException {
    DataInputStream reader = new DataInputStream(from);
    Set<Integer> replied = new HashSet<>();
    byte[] header = new byte[9];
    while (true) {
      reader.readFully(header);
      int length = ((header[0] & 0xff) << 16) | ((header[1] & 0xff) << 8) | (header[2] & 0xff);
      byte[] payload = new byte[length];
      reader.readFully(payload);
      int type = header[3] & 0xff;
      int stream =
          ((header[5] & 0x7f) << 24)
              | ((header[6] & 0xff) << 16)
              | ((header[7] & 0xff) << 8)
              | (header[8] & 0xff);
      if (type == HEADERS && stream != 0 && dropsArmed.get() > 0) {
        dropsArmed.decrementAndGet();
        dropped.incrementAndGet();
        quietlyClose(client);
        quietlyClose(upstream);
        return;
      }
      if (type == HEADERS && stream != 0 && replied.add(stream)) {
        Long delay;
        synchronized (delays) {
          delay = delays.poll();
        }
        if (delay != null) {
          delayed.incrementAndGet();
          TestServer.sleep(delay);
        }
      }
      to.write(header);
      to.write(payload);
      to.flush();
    }
  }
}
