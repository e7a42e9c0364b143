# frozen_string_literal: true

require "socket"
require "securerandom"
require "digest"
require "base64"
require "net/http"
require "tmpdir"
require "json"

module GMTest
  # A real `graphmind serve` for the test run (target/release/graphmind, built by
  # `cargo build -p graphmind-cli --release`; GRAPHMIND_BIN overrides).
  class Server
    attr_reader :port, :viewer_token, :bin

    # The server's SQLite file.
    def db_path = File.join(@dir, "g.db")

    def self.shared
      @shared ||= new.tap { |s| Minitest.after_run { s.stop } }
    end

    # `port`: 0 picks a free one; `args`: further `graphmind serve` flags.
    def initialize(port: 0, args: [])
      bin = ENV["GRAPHMIND_BIN"] || File.expand_path("../../../../target/release/graphmind", __dir__)
      raise "no server binary at #{bin}: cargo build -p graphmind-cli --release" unless File.executable?(bin)

      @bin = bin

      @dir = Dir.mktmpdir("gm-ruby-test")
      home = File.join(@dir, "gmhome")
      env = { "GRAPHMIND_PAUSE_ON_ERROR" => nil, "GRAPHMIND_DB" => nil, "GRAPHMIND_HOME" => home,
              "GRAPHMIND_TELEMETRY" => "0" }
      @io = IO.popen([env, bin, "--port", port.to_s, "--json", "--no-open", "--db", File.join(@dir, "g.db"), *args], "r", err: File::NULL)
      line = @io.gets or raise "graphmind serve printed nothing"
      @port = JSON.parse(line).fetch("port")
      # The viewer credential the server minted (its run file links to #token=...).
      opener = File.join(home, "run", "open-#{@port}.html")
      50.times { File.exist?(opener) ? break : sleep(0.02) }
      @viewer_token = File.read(opener)[/#token=([A-Za-z0-9_]+)/, 1] or raise "no viewer token in #{opener}"
    end

    def ingest_url = "ws://127.0.0.1:#{@port}/ingest"

    # The server's process id (the delivery tests stop and continue it).
    def pid = @io.pid

    def get_json(path)
      res = Net::HTTP.get_response(URI("http://127.0.0.1:#{@port}#{path}"))
      res.code == "200" ? JSON.parse(res.body, max_nesting: false) : nil
    end

    # Stored events of a run, once at least `count` are there.
    def events(run_id, count: 1, timeout: 10)
      deadline = Time.now + timeout
      loop do
        body = get_json("/api/runs/#{run_id}/events?limit=1000")
        events = body && (body["events"] || body)
        return events if events.is_a?(Array) && events.length >= count
        raise "run #{run_id}: fewer than #{count} events (#{events.inspect[0, 300]})" if Time.now > deadline

        sleep 0.02
      end
    end

    def run(run_id, timeout: 10)
      deadline = Time.now + timeout
      loop do
        run = (get_json("/api/runs") || {})["runs"]&.find { |r| r["id"] == run_id }
        return run if run && (!block_given? || yield(run))
        raise "run #{run_id} never matched: #{run.inspect}" if Time.now > deadline

        sleep 0.02
      end
    end

    def stop
      Process.kill("TERM", @io.pid)
      @io.close
    rescue StandardError
      nil
    ensure
      FileUtils.rm_rf(@dir) if @dir
    end
  end

  # A minimal debugger: a WebSocket client on /ws/ui (text frames only).
  class Viewer
    def initialize(port, token)
      @sock = TCPSocket.new("127.0.0.1", port)
      key = Base64.strict_encode64(SecureRandom.random_bytes(16))
      auth = token ? "Sec-WebSocket-Protocol: graphmind.v1, gm.auth.#{token}\r\n" : ""
      @sock.write("GET /ws/ui HTTP/1.1\r\nHost: 127.0.0.1:#{port}\r\nUpgrade: websocket\r\n" \
                  "Connection: Upgrade\r\n#{auth}Sec-WebSocket-Key: #{key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
      status = @sock.gets
      raise "ws handshake: #{status}" unless status&.include?("101")

      while (line = @sock.gets) && line != "\r\n"; end
      @buf = +""
      @seq = 0
      recv_type("welcome")
    end

    def send_text(text)
      data = text.b
      header = [0x81].pack("C")
      mask = SecureRandom.random_bytes(4)
      header << if data.bytesize < 126
                  [0x80 | data.bytesize].pack("C")
                elsif data.bytesize < 65_536
                  [0x80 | 126, data.bytesize].pack("Cn")
                else
                  [0x80 | 127, data.bytesize].pack("CQ>")
                end
      masked = data.bytes.each_with_index.map { |b, i| b ^ mask.getbyte(i % 4) }.pack("C*")
      @sock.write(header + mask + masked)
    end

    def control(type, payload, run_id: "*")
      @seq += 1
      env = { "gm" => 1, "seq" => @seq, "ts" => (Time.now.to_f * 1000).to_i, "runId" => run_id,
              "type" => type, "payload" => payload }
      send_text(JSON.generate({ "type" => "control", "envelope" => env }))
    end

    def breakpoint(matcher) = control("breakpoint.set", { "matcher" => matcher })
    def clear(matcher) = control("breakpoint.clear", { "matcher" => matcher })
    def mode(mode) = control("mode.set", { "mode" => mode })
    def watch(run_id) = send_text(JSON.generate({ "type" => "subscribe", "runId" => run_id }))

    def resume(run_id, pause_id, action, **extra)
      control("exec.resume", { "pauseId" => pause_id, "action" => action }.merge(extra), run_id: run_id)
    end

    # The next message of `type` (top level) within `timeout` seconds.
    def recv_type(type, timeout: 10)
      deadline = Time.now + timeout
      loop do
        msg = recv(deadline - Time.now)
        return msg if msg && msg["type"] == type
        raise "no #{type} message" if Time.now > deadline
      end
    end

    # The next event envelope of `type` (on a watched run, or any run's live relay).
    def next_event(type, timeout: 10)
      deadline = Time.now + timeout
      loop do
        msg = recv(deadline - Time.now)
        return msg["envelope"] if msg && msg["type"] == "event" && msg.dig("envelope", "type") == type
        raise "no #{type} event" if Time.now > deadline
      end
    end

    def close
      @sock.close
    rescue StandardError
      nil
    end

    private

    def recv(timeout)
      deadline = Time.now + [timeout, 0].max
      loop do
        frame = parse_frame
        next if frame == :again
        return frame if frame

        remaining = deadline - Time.now
        return nil if remaining <= 0
        next unless IO.select([@sock], nil, nil, remaining)

        @buf << @sock.readpartial(65_536)
      end
    end

    def parse_frame
      return nil if @buf.bytesize < 2

      b0 = @buf.getbyte(0)
      b1 = @buf.getbyte(1)
      len = b1 & 0x7f
      off = 2
      if len == 126
        return nil if @buf.bytesize < 4

        len = @buf.byteslice(2, 2).unpack1("n")
        off = 4
      elsif len == 127
        return nil if @buf.bytesize < 10

        len = @buf.byteslice(2, 8).unpack1("Q>")
        off = 10
      end
      return nil if @buf.bytesize < off + len

      payload = @buf.byteslice(off, len)
      @buf = @buf.byteslice(off + len, @buf.bytesize - off - len)
      opcode = b0 & 0x0f
      return :again unless opcode == 1

      JSON.parse(payload.force_encoding("UTF-8"))
    end
  end
end
