/**
 * A tiny TCP proxy in front of idemd that can lose replies.
 *
 * dropNextReply(): the next HTTP/2 response (its HEADERS frame, sent by the server after
 * it handled the call) is never forwarded: the connection is cut instead, as a network
 * that lost the reply would. delayNextReply(s): the next response, and everything the
 * server sends after it on that connection, is held for `s` seconds, as a slow network
 * would (the call is not re-sent: the server sees it once). cut() closes every
 * connection and refuses new ones until restore().
 */
import net from "node:net";

const HEADERS = 0x1;

export class Proxy {
  dropsArmed = 0;
  dropped = 0;
  /** Seconds each armed delay holds a reply, in the order armed. */
  delaysArmed: number[] = [];
  delayed = 0;
  /** Responses the server began (their first HEADERS frame), forwarded or not. */
  replies = 0;
  refusing = false;
  /** Seconds a new connection waits before it is forwarded (a slow reconnect). */
  connectDelay = 0;
  addr = "";
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly upstreamPort: number) {}

  async start(): Promise<this> {
    this.server = net.createServer((socket) => this.handle(socket));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    const address = this.server.address() as net.AddressInfo;
    this.addr = `127.0.0.1:${address.port}`;
    return this;
  }

  async close(): Promise<void> {
    this.closeAll();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  dropNextReply(): void {
    this.dropsArmed += 1;
  }

  delayNextReply(seconds: number): void {
    this.delaysArmed.push(seconds);
  }

  cut(): void {
    this.refusing = true;
    this.closeAll();
  }

  restore(): void {
    this.refusing = false;
    this.connectDelay = 0;
  }

  private closeAll(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private handle(client: net.Socket): void {
    if (this.refusing) {
      client.destroy();
      return;
    }
    client.pause();
    this.sockets.add(client);
    const connect = () => {
      if (client.destroyed) return;
      const upstream = net.connect(this.upstreamPort, "127.0.0.1");
      this.sockets.add(upstream);
      const closeBoth = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on("error", closeBoth).on("close", closeBoth);
      upstream.on("error", closeBoth).on("close", closeBoth);
      client.on("data", (data) => upstream.write(data));
      client.resume();
      // Server to client, frame by frame, so a response can be dropped whole, or held
      // (with all that follows it, in order) for the delay armed.
      let buffer = Buffer.alloc(0);
      const replied = new Set<number>();
      let held: Buffer[] | undefined;
      const forward = (frame: Buffer) => {
        if (held !== undefined) held.push(frame);
        else client.write(frame);
      };
      upstream.on("data", (data: Buffer) => {
        buffer = Buffer.concat([buffer, data]);
        while (buffer.length >= 9) {
          const length = buffer.readUIntBE(0, 3);
          if (buffer.length < 9 + length) break;
          const frame = buffer.subarray(0, 9 + length);
          buffer = buffer.subarray(9 + length);
          const stream = frame.readUInt32BE(5) & 0x7fffffff;
          if (frame[3] === HEADERS && stream !== 0 && this.dropsArmed > 0) {
            this.dropsArmed -= 1;
            this.dropped += 1;
            closeBoth();
            return;
          }
          // A response's first HEADERS frame (its trailers are HEADERS too).
          if (frame[3] === HEADERS && stream !== 0 && !replied.has(stream)) {
            replied.add(stream);
            this.replies += 1;
            const delay = held === undefined ? this.delaysArmed.shift() : undefined;
            if (delay !== undefined) {
              this.delayed += 1;
              held = [];
              setTimeout(() => {
                for (const frame of held ?? []) if (!client.destroyed) client.write(frame);
                held = undefined;
              }, delay * 1000);
            }
          }
          forward(frame);
        }
      });
    };
    if (this.connectDelay > 0) setTimeout(connect, this.connectDelay * 1000);
    else connect();
  }
}
