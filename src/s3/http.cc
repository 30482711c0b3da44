#include "s3/http.h"

#include <curl/curl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "s3/addresses.h"
#include "util/node.h"

namespace rckpt::s3 {

// A request's state while the client's thread moves it.
class HttpClient::Call {
 public:
  explicit Call(const HttpRequest& request) : req(request) {}

  const HttpRequest& req;
  HttpResponse resp;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  // The store's addresses (null: curl resolves the name itself), and the
  // entry that gives them to the lane in its order.
  std::string host;
  int port = 0;
  std::shared_ptr<const std::vector<Address>> addresses;
  curl_slist* resolve = nullptr;
  size_t sent = 0;        // body bytes given to curl
  long status_seen = -1;  // the status the body being written belongs to
  bool overflow = false;  // a 2xx body longer than `into`
  char error_buffer[CURL_ERROR_SIZE] = {};

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

namespace {

// An answer that is not for `into` (an error's XML, a listing) is kept up to
// this size; a longer one fails the request.
constexpr size_t kMaxTextBody = 64ull << 20;

// curl's receive buffer of each transfer (16 KiB by default): fewer reads
// and body callbacks per answer, at most max_connections of them.
constexpr long kReceiveBuffer = 256L << 10;

// Transfers per lane (transport thread) when a client has many: TLS and the
// copying of one lane's transfers keep its thread busy well before the
// network is.
constexpr int kConnectionsPerLane = 4;
constexpr int kMaxLanes = 8;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    call->resp.headers.clear();  // a new answer (after a 100 Continue, say)
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    call->resp.headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                    Trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const size_t bytes = size * n;
  if (call->status_seen < 0) {
    long status = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    call->status_seen = status;
  }
  const bool success = call->status_seen >= 200 && call->status_seen < 300;
  if (success && !call->req.into.empty()) {
    const uint64_t at = call->resp.into_bytes;
    if (bytes > call->req.into.size() - at) {
      call->overflow = true;
      return 0;  // fails the transfer with CURLE_WRITE_ERROR
    }
    std::memcpy(call->req.into.data() + at, data, bytes);
    call->resp.into_bytes += bytes;
    return bytes;
  }
  if (call->resp.body.size() + bytes > kMaxTextBody) {
    call->overflow = true;
    return 0;
  }
  call->resp.body.append(data, bytes);
  return bytes;
}

size_t OnRead(char* buffer, size_t size, size_t n, void* user) {
  auto* call = static_cast<HttpClient::Call*>(user);
  const std::span<const std::byte> body = call->req.body;
  const size_t take = std::min(size * n, body.size() - call->sent);
  std::memcpy(buffer, body.data() + call->sent, take);
  call->sent += take;
  return take;
}

// curl rewinds the body to send it again (a reused connection that turned
// out closed, say).
int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* call = static_cast<HttpClient::Call*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > call->req.body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  call->sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

// The host and port `url` names (the scheme's port when it names none).
bool ParseHostPort(const std::string& url, std::string* host, int* port) {
  CURLU* u = curl_url();
  if (u == nullptr) return false;
  char* h = nullptr;
  char* p = nullptr;
  const bool ok = curl_url_set(u, CURLUPART_URL, url.c_str(), CURLU_PATH_AS_IS) == CURLUE_OK &&
                  curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
                  curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK;
  if (ok) {
    *host = h;
    *port = std::atoi(p);
  }
  curl_free(h);
  curl_free(p);
  curl_url_cleanup(u);
  return ok && *port > 0;
}

TransportError Classify(CURLcode code) {
  switch (code) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::kTimeout;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
      return TransportError::kTls;
    default:
      return TransportError::kBroken;
  }
}

}  // namespace

// One transport thread: a multi handle and the transfers it moves. TLS,
// the copying of bodies and curl's own work for those transfers run on it.
struct HttpClient::Lane {
  int index = 0;
  int max_connections = 1;
  CURLM* multi = nullptr;
  int free = 0;  // transfers it may still take; guarded by Impl::mu
  // Owned by the thread.
  std::vector<std::shared_ptr<Call>> active;
  std::vector<CURL*> idle_easy;
  std::thread thread;

  ~Lane() {
    for (CURL* e : idle_easy) curl_easy_cleanup(e);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

struct HttpClient::Impl {
  // The process the client's threads run in: a child made by fork() has no
  // such threads, and its requests fail instead of waiting forever.
  pid_t owner = ::getpid();
  std::string ca_file;
  // TLS sessions, shared by the lanes so that a new connection resumes one
  // another lane began. Each lane's DNS cache is its own: it holds that
  // lane's order of the store's addresses.
  CURLSH* share = nullptr;
  std::mutex share_mu[CURL_LOCK_DATA_LAST];
  AddressBook addresses;

  std::mutex mu;
  std::deque<std::shared_ptr<Call>> queued;  // guarded by mu
  bool stopping = false;                     // guarded by mu
  std::vector<std::unique_ptr<Lane>> lanes;

  ~Impl() {
    lanes.clear();  // their easy handles use the share
    if (share != nullptr) curl_share_cleanup(share);
  }

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<Impl*>(user)->share_mu[data].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* user) {
    static_cast<Impl*>(user)->share_mu[data].unlock();
  }

  static void Done(const std::shared_ptr<Call>& call) {
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->done = true;
    }
    call->cv.notify_all();
  }

  static void Fail(const std::shared_ptr<Call>& call, std::string text) {
    call->resp.error = TransportError::kBroken;
    call->resp.error_text = std::move(text);
    Done(call);
  }

  // Takes `call`'s easy handle off the lane, keeping it for the next call.
  static void Release(Lane& lane, Call& call) {
    curl_multi_remove_handle(lane.multi, call.easy);
    curl_slist_free_all(call.headers);
    call.headers = nullptr;
    curl_slist_free_all(call.resolve);
    call.resolve = nullptr;
    lane.idle_easy.push_back(call.easy);
    call.easy = nullptr;
  }

  static void Finish(Lane& lane, const std::shared_ptr<Call>& call, CURLcode code) {
    HttpResponse& r = call->resp;
    long status = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    r.status = static_cast<int>(status);
    r.error = call->overflow ? TransportError::kTooLong : Classify(code);
    if (code != CURLE_OK) {
      r.error_text = call->overflow ? "the answer was longer than the bytes asked for"
                     : call->error_buffer[0] != '\0' ? std::string(call->error_buffer)
                                                     : std::string(curl_easy_strerror(code));
    }
    Release(lane, *call);
    Done(call);
  }

  // Sets up `call` on an easy handle of `lane` and adds it to the lane's
  // multi handle.
  void Begin(Lane& lane, const std::shared_ptr<Call>& call) {
    CURL* e = nullptr;
    if (!lane.idle_easy.empty()) {
      e = lane.idle_easy.back();
      lane.idle_easy.pop_back();
      curl_easy_reset(e);
    } else {
      e = curl_easy_init();
    }
    if (e == nullptr) {
      Fail(call, "libcurl could not make a transfer (out of memory)");
      return;
    }
    call->easy = e;
    const HttpRequest& q = call->req;
    curl_easy_setopt(e, CURLOPT_PRIVATE, call.get());
    curl_easy_setopt(e, CURLOPT_URL, q.url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(q.connect_timeout_ms));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1, q.stall_timeout_s)));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReceiveBuffer);
    if (share != nullptr) curl_easy_setopt(e, CURLOPT_SHARE, share);
    if (call->addresses != nullptr) {
      // "+": the entry times out of the lane's DNS cache as a lookup of
      // curl's own would, never kept past the store's next answer.
      std::string entry = "+";
      entry.append(ResolveEntry(call->host, call->port, *call->addresses, lane.index));
      call->resolve = curl_slist_append(nullptr, entry.c_str());
      if (call->resolve != nullptr) curl_easy_setopt(e, CURLOPT_RESOLVE, call->resolve);
    }
    // Keys are sent as they are: "a/./b" and "a/../b" are keys, not paths
    // to normalise.
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->error_buffer);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, call.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call.get());
    if (!ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file.c_str());
    if (q.no_proxy) curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    // S3 answers 100 Continue late or never on some servers: send at once.
    call->headers = curl_slist_append(call->headers, "Expect:");
    for (const auto& [name, value] : q.headers) {
      call->headers = curl_slist_append(call->headers, (name + ": " + value).c_str());
    }
    if (q.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (q.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (q.method == "PUT") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(q.body.size()));
    } else if (q.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(q.body.size()));
      // The XML bodies' type, unless the request gives its own (a
      // CreateMultipartUpload gives the object's).
      const bool typed = std::any_of(q.headers.begin(), q.headers.end(), [](const auto& h) {
        return strcasecmp(h.first.c_str(), "content-type") == 0;
      });
      if (!typed) call->headers = curl_slist_append(call->headers, "Content-Type: application/xml");
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, q.method.c_str());
    }
    if (q.method == "PUT" || q.method == "POST") {
      curl_easy_setopt(e, CURLOPT_READFUNCTION, OnRead);
      curl_easy_setopt(e, CURLOPT_READDATA, call.get());
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, OnSeek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, call.get());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
    const CURLMcode added = curl_multi_add_handle(lane.multi, e);
    if (added != CURLM_OK) {
      curl_slist_free_all(call->headers);
      call->headers = nullptr;
      curl_slist_free_all(call->resolve);
      call->resolve = nullptr;
      lane.idle_easy.push_back(e);
      call->easy = nullptr;
      Fail(call,
           std::string("libcurl could not start the transfer: ") + curl_multi_strerror(added));
      return;
    }
    lane.active.push_back(call);
  }

  // The lane that should take a call just queued: the one with the most
  // room, so that a burst of calls spreads over the lanes. Null when every
  // lane is full (the first to finish a transfer takes the call). Holds mu.
  Lane* Pick() {
    Lane* best = nullptr;
    for (const std::unique_ptr<Lane>& lane : lanes) {
      if (lane->free > 0 && (best == nullptr || lane->free > best->free)) best = lane.get();
    }
    if (best != nullptr) --best->free;
    return best;
  }

  void Run(Lane& lane) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        while (!queued.empty() && static_cast<int>(lane.active.size()) < lane.max_connections) {
          std::shared_ptr<Call> call = std::move(queued.front());
          queued.pop_front();
          Begin(lane, call);
        }
        lane.free = lane.max_connections - static_cast<int>(lane.active.size());
      }
      int running = 0;
      curl_multi_perform(lane.multi, &running);
      int left = 0;
      bool finished = false;
      while (CURLMsg* msg = curl_multi_info_read(lane.multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = std::find_if(
            lane.active.begin(), lane.active.end(),
            [&](const std::shared_ptr<Call>& c) { return c->easy == msg->easy_handle; });
        if (it == lane.active.end()) continue;
        std::shared_ptr<Call> call = std::move(*it);
        lane.active.erase(it);
        Finish(lane, call, msg->data.result);
        finished = true;
      }
      // A transfer that finished leaves room for a queued call: take it
      // before waiting.
      if (!finished) curl_multi_poll(lane.multi, nullptr, 0, 1000, nullptr);
    }
    // Stopping: whatever is left fails.
    for (std::shared_ptr<Call>& call : lane.active) {
      Release(lane, *call);
      Fail(call, "the S3 client was closed");
    }
    lane.active.clear();
    std::lock_guard<std::mutex> lock(mu);
    for (std::shared_ptr<Call>& call : queued) Fail(call, "the S3 client was closed");
    queued.clear();
  }
};

const std::string* HttpResponse::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return &v;
  }
  return nullptr;
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

int HttpClient::LanesFor(int max_connections) {
  const int wanted = (std::max(1, max_connections) + kConnectionsPerLane - 1) / kConnectionsPerLane;
  return std::clamp(wanted, 1, std::min(kMaxLanes, std::max(2, DefaultThreads())));
}

Result<std::unique_ptr<HttpClient>> HttpClient::Create(int max_connections, std::string ca_file) {
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) {
    return Status::IoError(std::string("libcurl could not be initialised: ") +
                           curl_easy_strerror(global));
  }
  auto impl = std::make_unique<Impl>();
  impl->ca_file = std::move(ca_file);
  impl->share = curl_share_init();
  if (impl->share != nullptr) {
    curl_share_setopt(impl->share, CURLSHOPT_LOCKFUNC, Impl::Lock);
    curl_share_setopt(impl->share, CURLSHOPT_UNLOCKFUNC, Impl::Unlock);
    curl_share_setopt(impl->share, CURLSHOPT_USERDATA, impl.get());
    curl_share_setopt(impl->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  max_connections = std::max(1, max_connections);
  const int lanes = LanesFor(max_connections);
  for (int i = 0; i < lanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    // The connections split as evenly as they go: 16 over 3 lanes is 6, 5, 5.
    lane->max_connections = max_connections / lanes + (i < max_connections % lanes ? 1 : 0);
    lane->free = lane->max_connections;
    lane->multi = curl_multi_init();
    if (lane->multi == nullptr) return Status::IoError("libcurl could not make a multi handle");
    curl_multi_setopt(lane->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(lane->max_connections));
    impl->lanes.push_back(std::move(lane));
  }
  Impl* raw = impl.get();
  for (size_t i = 0; i < impl->lanes.size(); ++i) {
    Lane* lane = impl->lanes[i].get();
    try {
      lane->thread = std::thread([raw, lane] { raw->Run(*lane); });
    } catch (const std::system_error& e) {
      {
        std::lock_guard<std::mutex> lock(impl->mu);
        impl->stopping = true;
      }
      for (size_t j = 0; j < i; ++j) {
        curl_multi_wakeup(impl->lanes[j]->multi);
        impl->lanes[j]->thread.join();
      }
      return Status::IoError(std::string("cannot start the S3 transport thread: ") + e.what());
    }
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::~HttpClient() {
  if (::getpid() != impl_->owner) {
    // Forked: the threads and the transfers are the parent's; nothing here
    // may touch them.
    for (std::unique_ptr<Lane>& lane : impl_->lanes) lane->thread.detach();
    (void)impl_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  for (std::unique_ptr<Lane>& lane : impl_->lanes) curl_multi_wakeup(lane->multi);
  for (std::unique_ptr<Lane>& lane : impl_->lanes) lane->thread.join();
}

int HttpClient::lanes() const { return static_cast<int>(impl_->lanes.size()); }

std::shared_ptr<HttpClient::Call> HttpClient::Start(const HttpRequest& request) {
  auto call = std::make_shared<Call>(request);
  if (::getpid() != impl_->owner) {
    Impl::Fail(call,
               "this S3 file system was made in another process (before a "
               "fork): make a new "
               "one in this process");
    return call;
  }
  if (impl_->lanes.size() > 1 && !request.no_proxy) {
    // Outside the lock: asking the resolver may take a while.
    if (ParseHostPort(request.url, &call->host, &call->port)) {
      call->addresses = impl_->addresses.Lookup(call->host);
    }
  }
  Lane* lane = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) {
      Impl::Fail(call, "the S3 client was closed");
      return call;
    }
    impl_->queued.push_back(call);
    lane = impl_->Pick();
  }
  if (lane != nullptr) curl_multi_wakeup(lane->multi);
  return call;
}

HttpResponse HttpClient::Wait(Call& call) {
  std::unique_lock<std::mutex> lock(call.mu);
  call.cv.wait(lock, [&] { return call.done; });
  return std::move(call.resp);
}

HttpResponse HttpClient::Perform(const HttpRequest& request) {
  std::shared_ptr<Call> call = Start(request);
  return Wait(*call);
}

}  // namespace rckpt::s3
