"""Emulation of the stock HiWonder JetRover stack (bringup + Nav2), for system tests.

A test double of what the *real* robot runs underneath glove_ros, written from the public
sources named below (read, never copied). It is deliberately independent of our own
simulator (glove_ros/nodes/simulator_node.py, glove_ros/core/world/sim.py): it imports
nothing from glove_ros and reads the site file with PyYAML itself. Run it as a process
(``python -m stock_jetrover --ros-args -p site:=my_site.yaml``) with the test-only
``nav2_msgs`` stand-in on the path (built by test/test_node_nav2_action.py).

Documented behaviour reproduced, and where it is documented:

* **AMCL pose** (ros-navigation/navigation2, nav2_amcl/src/amcl_node.cpp: ``laserReceived``,
  ``shouldUpdateFilter``, ``publishAmclPose``, ``initPubSub``, ``initialPoseReceived``):
  ``amcl_pose`` (geometry_msgs/PoseWithCovarianceStamped, frame ``map`` = global_frame_id,
  stamped with the scan's time, with a covariance) is published on the first filter update,
  then only when a scan finds the robot moved more than ``update_min_d`` (0.25 m, per axis
  |dx| or |dy|) or turned more than ``update_min_a`` (0.2 rad) since the last update
  (resample_interval 1: every update publishes), and on the first scan after an
  ``initialpose`` in ``map`` (other frames are ignored). A robot standing still is silent.
  The publisher is KeepLast(1), transient_local, reliable: late joiners get the last pose.
  Scans are emulated at ``scan_rate``; the estimate is the true pose (no filter noise).
  ``initialpose`` here also *moves* the robot (a person carried it there and said so).
* **tf** (same file, ``sendMapToOdomTransform``; HiWonder's odom_publisher / EKF):
  ``map -> odom`` at the scan rate, ``odom -> base_footprint`` with the odometry (only
  where tf2_msgs is importable).
* **Odometry** (HiWonder JetRover ROS 2 workspace, e.g. tgishor/JetRover-Modified-ROS2-
  Workspace src/driver/controller/controller/odom_publisher_node.py: frame ``odom``, child
  ``base_footprint``; the robot's EKF republishes it as ``odom``): nav_msgs/Odometry on
  ``odom`` at ``odom_rate`` (20 Hz), twist = the commanded velocity (zero when stopped).
* **Battery** (same workspace, src/driver/ros_robot_controller/ros_robot_controller/
  ros_robot_controller_node.py ``pub_battery_data``: std_msgs/UInt16 millivolts on
  ``~/battery`` of node ``ros_robot_controller``): a 3S pack, 11.1-12.6 V, falling by
  ``drain_mv_per_m`` per metre driven. The JetRover charges through a cable (no dock
  contacts, no dock service): once the robot has stood at the site's dock waypoint for
  ``plug_delay`` s, the charger is connected: the reading jumps by ``plug_mv`` and the pack
  charges slowly (``charge_mv_per_s``), capped at 12.6 V; driving off unplugs it.
* **Camera** (HiWonder apps subscribe ``/depth_cam/rgb/image_raw``, e.g. the same
  workspace's src/example/example/color_detect/color_detect_node.py; Angstrong units publish
  ``/ascamera/camera_publisher/rgb0/image``, DESIGN.md section 8): sensor_msgs/Image, rgb8,
  640x480, sensor-data QoS (BEST_EFFORT); a plain frame (nothing to detect).
  ``camera:=angstrong`` switches the topic.
* **NavigateToPose** (navigation2 nav2_msgs/action/NavigateToPose.action and
  ComputePathToPose.action; Jazzy propagates the planner's error code into the result,
  Humble's result has none): the server ``navigate_to_pose`` plans its *own* route over the
  site's corridors (shortest open path, Dijkstra; it never takes a closed corridor and goes
  around one when another path exists), drives it at ``speed`` (turning on the spot at
  ``turn_rate``), publishes feedback (current_pose in ``map``, navigation_time,
  estimated_time_remaining, distance_remaining) at 10 Hz, replans at each waypoint when a
  corridor ahead closed, aborts with NO_VALID_PATH (208) when no route exists, with
  GOAL_OUTSIDE_MAP (204) when the goal is not at a waypoint, with TF_ERROR (9002) for a goal
  not in ``map``. Cancel stops the robot at the next control tick (50 Hz). A new goal
  preempts (aborts) the running one.

Test controls (not part of the stock stack):
  sub  emulator/close_corridor, emulator/open_corridor  std_msgs/String "a:b"
  sub  emulator/abort_next   std_msgs/UInt16: the next goal aborts with this error code
                             after ``abort_after`` s of driving (0 = no code, as Humble)
  pub  emulator/route        std_msgs/String "a,b,c" (latched): the waypoints the last goal
                             actually drove through (the start waypoint first)
  pub  emulator/events       std_msgs/String: "goal <planned route>", "cancel_request",
                             "succeeded", "aborted <code>", "canceled"
"""

from __future__ import annotations

import array
import heapq
import math
import threading
import time

import yaml
from geometry_msgs.msg import PoseWithCovarianceStamped, TransformStamped
from nav2_msgs.action import NavigateToPose
from nav_msgs.msg import Odometry
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image
from std_msgs.msg import String, UInt16

try:  # not in every ROS install (the pip wheels here lack it): tf is then not published
    from tf2_msgs.msg import TFMessage
except ImportError:
    TFMessage = None

CAMERA_TOPICS = {"dabai": "depth_cam/rgb/image_raw",
                 "angstrong": "/ascamera/camera_publisher/rgb0/image"}
FULL_MV = 12600  # 3S LiPo, 4.2 V a cell
EMPTY_MV = 11100
AT_WAYPOINT = 0.3  # metres: the robot stands at a waypoint / a goal is at a waypoint
DT = 0.02  # control tick, seconds
NO_VALID_PATH, GOAL_OUTSIDE_MAP, TF_ERROR = 208, 204, 9002
PARAMS = {"site": "", "start": "", "speed": 0.4, "turn_rate": 1.5, "update_min_d": 0.25,
          "update_min_a": 0.2, "scan_rate": 10.0, "odom_rate": 20.0, "camera": "dabai",
          "camera_rate": 5.0, "battery_rate": 2.0, "battery_mv": 11800, "drain_mv_per_m": 2.0,
          "plug_delay": 5.0, "plug_mv": 300, "charge_mv_per_s": 0.5, "abort_after": 0.5}


def wrap(a: float) -> float:
    """An angle in (-pi, pi]."""
    return math.atan2(math.sin(a), math.cos(a))


def compose(a: tuple, b: tuple) -> tuple:
    """Pose ``b`` expressed in frame ``a`` -> in ``a``'s parent frame (2D)."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return (a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], wrap(a[2] + b[2]))


def yaw_of(q) -> float:
    """Yaw of a geometry_msgs/Quaternion."""
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def inverse(a: tuple) -> tuple:
    """The inverse of a 2D transform."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return (-c * a[0] - s * a[1], s * a[0] - c * a[1], -a[2])


class Site:
    """Waypoints and corridors of a site file (the project's world-file format)."""

    def __init__(self, path: str) -> None:
        with open(path) as f:
            data = yaml.safe_load(f)
        self.dock = str(data["dock"])
        self.start = str(data.get("start", self.dock))
        self.waypoints = {str(w["id"]): (float(w["x"]), float(w["y"]), float(w.get("yaw", 0.0)))
                          for w in data["waypoints"]}
        self.edges: set[frozenset] = set()
        self.closed: set[frozenset] = set()
        for e in data.get("edges") or []:
            a, b = (e["a"], e["b"]) if isinstance(e, dict) else (e[0], e[1])
            key = frozenset((str(a), str(b)))
            self.edges.add(key)
            if isinstance(e, dict) and e.get("blocked"):
                self.closed.add(key)

    def dist(self, a: str, b: str) -> float:
        return math.dist(self.waypoints[a][:2], self.waypoints[b][:2])

    def nearest(self, x: float, y: float, tol: float = AT_WAYPOINT) -> str | None:
        best = min(self.waypoints, key=lambda w: math.dist((x, y), self.waypoints[w][:2]))
        return best if math.dist((x, y), self.waypoints[best][:2]) <= tol else None

    def sources(self, x: float, y: float) -> dict[str, float]:
        """Where a route from (x, y) may begin: the waypoint the robot stands at, else both
        ends of the corridor it is on (with the distance to each)."""
        at = self.nearest(x, y)
        if at is not None:
            return {at: 0.0}

        def off(edge: frozenset) -> float:  # distance of (x, y) from the corridor's segment
            (ax, ay, _), (bx, by, _) = (self.waypoints[w] for w in sorted(edge))
            L2 = (bx - ax) ** 2 + (by - ay) ** 2 or 1e-9
            t = max(0.0, min(1.0, ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / L2))
            return math.dist((x, y), (ax + t * (bx - ax), ay + t * (by - ay)))

        edge = min(self.edges, key=off)
        return {w: math.dist((x, y), self.waypoints[w][:2]) for w in edge}

    def route(self, sources: dict[str, float], goal: str) -> list[str] | None:
        """Shortest path over open corridors (Dijkstra), or None when there is none."""
        best = dict(sources)
        prev: dict[str, str] = {}
        queue = [(d, w) for w, d in sources.items()]
        heapq.heapify(queue)
        while queue:
            d, w = heapq.heappop(queue)
            if w == goal:
                path = [w]
                while path[-1] in prev:
                    path.append(prev[path[-1]])
                return path[::-1]
            if d > best.get(w, math.inf):
                continue
            for e in self.edges - self.closed:
                if w in e:
                    (n,) = e - {w}
                    nd = d + self.dist(w, n)
                    if nd < best.get(n, math.inf):
                        best[n], prev[n] = nd, w
                        heapq.heappush(queue, (nd, n))
        return None


class StockJetRover:
    """The robot: one true pose, driven by NavigateToPose goals, seen through its sensors."""

    def __init__(self, node) -> None:
        self.node = node
        for name, default in PARAMS.items():
            node.declare_parameter(name, default)
        self.p = p = {k: node.get_parameter(k).value for k in PARAMS}
        if p["camera"] not in CAMERA_TOPICS:
            raise ValueError(f"camera must be one of {', '.join(CAMERA_TOPICS)}")
        self.site = Site(p["site"])
        start = self.site.waypoints[p["start"] or self.site.start]
        self.lock = threading.Lock()
        self.pose = start  # true pose in map
        self.odom_origin = start  # map -> odom
        self.vel = (0.0, 0.0)
        self.driven_m = 0.0
        self.driving = False
        self.gen = 0  # goal generation: a newer goal preempts an older one
        self.abort_next: int | None = None
        self.rest_mv = float(p["battery_mv"])
        self.last_battery = (time.monotonic(), 0.0)
        self.at_dock_since: float | None = None
        self.amcl_at: tuple | None = None  # pose at the last filter update (None: re-init)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        group = ReentrantCallbackGroup()
        self.amcl_pub = node.create_publisher(PoseWithCovarianceStamped, "amcl_pose", latched)
        self.odom_pub = node.create_publisher(Odometry, "odom", 10)
        self.tf_pub = (node.create_publisher(TFMessage, "/tf", 100) if TFMessage is not None
                       else None)
        self.battery_pub = node.create_publisher(UInt16, "ros_robot_controller/battery", 1)
        self.image_pub = node.create_publisher(Image, CAMERA_TOPICS[p["camera"]],
                                               qos_profile_sensor_data)
        self.route_pub = node.create_publisher(String, "emulator/route", latched)
        self.event_pub = node.create_publisher(String, "emulator/events", 10)
        node.create_subscription(PoseWithCovarianceStamped, "initialpose", self._on_initialpose,
                                 10, callback_group=group)
        node.create_subscription(String, "emulator/close_corridor",
                                 lambda m: self._corridor(m.data, True), 10, callback_group=group)
        node.create_subscription(String, "emulator/open_corridor",
                                 lambda m: self._corridor(m.data, False), 10, callback_group=group)
        node.create_subscription(UInt16, "emulator/abort_next", self._on_abort_next, 10,
                                 callback_group=group)
        self.image = Image(height=480, width=640, encoding="rgb8", step=640 * 3)
        self.image.header.frame_id = "depth_cam_color_optical_frame"
        self.image.data = array.array("B", bytes([200, 196, 188]) * (640 * 480))  # a plain wall
        for rate, tick in ((p["scan_rate"], self._scan), (p["odom_rate"], self._odom),
                           (p["battery_rate"], self._battery), (p["camera_rate"], self._camera)):
            node.create_timer(1.0 / rate, tick, callback_group=group)
        self.server = ActionServer(node, NavigateToPose, "navigate_to_pose", self._execute,
                                   goal_callback=lambda _g: GoalResponse.ACCEPT,
                                   cancel_callback=self._on_cancel, callback_group=group)
        node.get_logger().info(
            f"stock JetRover emulation: site {p['site']}, at {p['start'] or self.site.start}, "
            f"camera {CAMERA_TOPICS[p['camera']]}, speed {p['speed']} m/s")

    # sensors ---------------------------------------------------------------------------
    def _stamp(self):
        return self.node.get_clock().now().to_msg()

    def _scan(self) -> None:
        """One laser scan through AMCL: a filter update (and amcl_pose) only after motion."""
        with self.lock:
            pose, last = self.pose, self.amcl_at
        if last is not None:
            dx, dy, da = pose[0] - last[0], pose[1] - last[1], wrap(pose[2] - last[2])
            if (abs(dx) <= self.p["update_min_d"] and abs(dy) <= self.p["update_min_d"]
                    and abs(da) <= self.p["update_min_a"]):
                self._tf("map", "odom", self.odom_origin)  # AMCL re-sends the last transform
                return
        with self.lock:
            self.amcl_at = pose
        msg = PoseWithCovarianceStamped()
        msg.header.stamp, msg.header.frame_id = self._stamp(), "map"
        self._fill(msg.pose.pose, pose)
        cov = [0.0] * 36
        cov[0], cov[1], cov[6], cov[7], cov[35] = 0.0025, 0.0004, 0.0004, 0.0025, 0.0009
        msg.pose.covariance = cov
        self.amcl_pub.publish(msg)
        self._tf("map", "odom", self.odom_origin)

    def _odom(self) -> None:
        with self.lock:
            pose, (v, w), origin = self.pose, self.vel, self.odom_origin
        local = compose(inverse(origin), pose)
        msg = Odometry()
        msg.header.stamp, msg.header.frame_id = self._stamp(), "odom"
        msg.child_frame_id = "base_footprint"
        self._fill(msg.pose.pose, local)
        msg.twist.twist.linear.x, msg.twist.twist.angular.z = float(v), float(w)
        self.odom_pub.publish(msg)
        self._tf("odom", "base_footprint", local)

    def _tf(self, parent: str, child: str, pose: tuple) -> None:
        if self.tf_pub is None:
            return
        t = TransformStamped()
        t.header.stamp, t.header.frame_id, t.child_frame_id = self._stamp(), parent, child
        t.transform.translation.x, t.transform.translation.y = pose[0], pose[1]
        t.transform.rotation.z = math.sin(pose[2] / 2)
        t.transform.rotation.w = math.cos(pose[2] / 2)
        self.tf_pub.publish(TFMessage(transforms=[t]))

    def _battery(self) -> None:
        """Pack voltage in mV: drains with distance, rises on the charger at the dock."""
        now = time.monotonic()
        with self.lock:
            t0, m0 = self.last_battery
            self.last_battery = (now, self.driven_m)
            if self.driving or self.site.nearest(*self.pose[:2]) != self.site.dock:
                self.at_dock_since = None
            elif self.at_dock_since is None:
                self.at_dock_since = now
            plugged = self.at_dock_since is not None and \
                now - self.at_dock_since >= self.p["plug_delay"]
            self.rest_mv -= self.p["drain_mv_per_m"] * (self.driven_m - m0)
            if plugged:
                self.rest_mv += self.p["charge_mv_per_s"] * (now - t0)
            self.rest_mv = max(EMPTY_MV, min(FULL_MV, self.rest_mv))
            mv = min(FULL_MV, self.rest_mv + (self.p["plug_mv"] if plugged else 0))
        self.battery_pub.publish(UInt16(data=int(mv)))

    def _camera(self) -> None:
        self.image.header.stamp = self._stamp()
        self.image_pub.publish(self.image)

    @staticmethod
    def _fill(pose_msg, pose: tuple) -> None:
        pose_msg.position.x, pose_msg.position.y = float(pose[0]), float(pose[1])
        pose_msg.orientation.z = math.sin(pose[2] / 2)
        pose_msg.orientation.w = math.cos(pose[2] / 2)

    # test controls and initialpose ------------------------------------------------------
    def _on_initialpose(self, msg) -> None:
        if msg.header.frame_id.lstrip("/") != "map":
            self.node.get_logger().warning(f"ignoring initial pose in frame "
                                           f"'{msg.header.frame_id}' (global frame is 'map')")
            return
        yaw = yaw_of(msg.pose.pose.orientation)
        new = (msg.pose.pose.position.x, msg.pose.pose.position.y, yaw)
        with self.lock:  # odometry does not jump: map -> odom absorbs the move
            local = compose(inverse(self.odom_origin), self.pose)
            self.pose = new
            self.odom_origin = compose(new, inverse(local))
            self.amcl_at = None  # the filter re-initialises: the next scan publishes
        self.node.get_logger().info(f"initial pose set: ({new[0]:.2f}, {new[1]:.2f}, {yaw:.2f})")

    def _corridor(self, text: str, close: bool) -> None:
        key = frozenset(text.split(":"))
        if key not in self.site.edges:
            self.node.get_logger().warning(f"no corridor '{text}' on the site")
            return
        with self.lock:
            (self.site.closed.add if close else self.site.closed.discard)(key)
        self.node.get_logger().info(f"corridor {text} {'closed' if close else 'open'}")
        self._event(f"{'closed' if close else 'opened'} {text}")

    def _on_abort_next(self, msg) -> None:
        with self.lock:
            self.abort_next = int(msg.data)
        self._event(f"abort_next {msg.data}")

    def _event(self, text: str) -> None:
        self.event_pub.publish(String(data=text))

    # NavigateToPose ---------------------------------------------------------------------
    def _on_cancel(self, _handle) -> CancelResponse:
        self._event("cancel_request")
        return CancelResponse.ACCEPT

    def _plan(self, goal: str) -> list[str] | None:
        with self.lock:
            x, y, _ = self.pose
            return self.site.route(self.site.sources(x, y), goal)

    def _execute(self, handle):
        t0 = time.monotonic()
        with self.lock:
            self.gen += 1
            gen, code = self.gen, self.abort_next
            self.abort_next = None
            self.driving = True
        target = handle.request.pose
        abort_at = None if code is None else t0 + self.p["abort_after"]
        driven: list[str] = []
        if target.header.frame_id.lstrip("/") != "map":
            return self._finish(handle, gen, "aborted", driven, TF_ERROR,
                                f"cannot transform the goal from '{target.header.frame_id}'")
        goal = self.site.nearest(target.pose.position.x, target.pose.position.y)
        if goal is None:
            return self._finish(handle, gen, "aborted", driven, GOAL_OUTSIDE_MAP,
                                "the goal is not on the site's waypoint graph")
        goal_yaw = yaw_of(target.pose.orientation)
        route = self._plan(goal)
        self._event(f"goal {','.join(route or [])}")
        if route is None:
            return self._finish(handle, gen, "aborted", driven, NO_VALID_PATH, "no valid path")
        with self.lock:
            start = self.site.nearest(*self.pose[:2])
        if route[0] == start:
            driven.append(route.pop(0))
        while route:
            if driven and frozenset((driven[-1], route[0])) in self.site.closed:
                route = self._plan(goal)  # a corridor ahead closed: replan from here
                if route is None:
                    return self._finish(handle, gen, "aborted", driven, NO_VALID_PATH,
                                        "no valid path")
                route.pop(0)
                continue
            rest = sum(self.site.dist(a, b) for a, b in zip(route, route[1:], strict=False))
            how = self._move(handle, gen, t0, abort_at, self.site.waypoints[route[0]][:2], None,
                             rest)
            if how != "arrived":
                return self._stopped(handle, gen, how, driven, code)
            driven.append(route.pop(0))
        how = self._move(handle, gen, t0, abort_at, None, goal_yaw, 0.0)
        if how != "arrived":
            return self._stopped(handle, gen, how, driven, code)
        return self._finish(handle, gen, "succeeded", driven, 0, "")

    def _move(self, handle, gen, t0, abort_at, xy, yaw_goal, rest) -> str:
        """Drive to ``xy`` (turning towards it first) or turn to ``yaw_goal``; returns
        arrived | canceled | preempted | abort."""
        last = next_fb = time.monotonic()
        while True:
            now = time.monotonic()
            if handle.is_cancel_requested:
                return "canceled"
            if gen != self.gen:
                return "preempted"
            if abort_at is not None and now >= abort_at:
                return "abort"
            dt, last = min(now - last, 0.1), now
            with self.lock:
                x, y, yaw = self.pose
                d = math.dist((x, y), xy) if xy is not None else 0.0
                want = math.atan2(xy[1] - y, xy[0] - x) if d > 1e-3 else (
                    yaw_goal if yaw_goal is not None else yaw)
                err = wrap(want - yaw)
                v = w = 0.0
                if abs(err) > 0.02:
                    w = math.copysign(self.p["turn_rate"], err)
                    yaw = wrap(yaw + math.copysign(min(abs(err), self.p["turn_rate"] * dt), err))
                elif d > 1e-3:
                    v, yaw = self.p["speed"], want
                    step = min(d, v * dt)
                    x, y = x + step * math.cos(yaw), y + step * math.sin(yaw)
                    self.driven_m += step
                    d -= step
                self.pose, self.vel = (x, y, yaw), (v, w)
                done = v == 0.0 and w == 0.0
            if now >= next_fb or done:
                next_fb = now + 0.1
                self._feedback(handle, t0, d + rest)
            if done:
                return "arrived"
            time.sleep(DT)

    def _feedback(self, handle, t0: float, remaining: float) -> None:
        fb = NavigateToPose.Feedback()
        with self.lock:
            pose = self.pose
        fb.current_pose.header.stamp, fb.current_pose.header.frame_id = self._stamp(), "map"
        self._fill(fb.current_pose.pose, pose)
        elapsed = time.monotonic() - t0
        fb.navigation_time.sec, fb.navigation_time.nanosec = int(elapsed), int(elapsed % 1 * 1e9)
        eta = remaining / self.p["speed"]
        fb.estimated_time_remaining.sec = int(eta)
        fb.estimated_time_remaining.nanosec = int(eta % 1 * 1e9)
        fb.distance_remaining = float(remaining)
        try:
            handle.publish_feedback(fb)
        except Exception:  # the goal ended between the check and here
            pass

    def _stopped(self, handle, gen: int, how: str, driven: list[str], code: int | None):
        if how == "canceled":
            return self._finish(handle, gen, "canceled", driven, 0, "")
        if how == "preempted":
            return self._finish(handle, gen, "aborted", driven, 0, "preempted by a newer goal")
        return self._finish(handle, gen, "aborted", driven, int(code or 0), "told to abort")

    def _finish(self, handle, gen: int, status: str, driven: list[str], code: int, text: str):
        with self.lock:
            if gen == self.gen:  # not preempted: the robot stands still until the next goal
                self.vel, self.driving = (0.0, 0.0), False
        self.route_pub.publish(String(data=",".join(driven)))
        result = NavigateToPose.Result()
        if hasattr(result, "error_code"):  # Jazzy and later; Humble's result is empty
            result.error_code, result.error_msg = int(code), text
        {"succeeded": handle.succeed, "aborted": handle.abort,
         "canceled": handle.canceled}[status]()
        self._event(status if status != "aborted" else f"aborted {code}")
        self.node.get_logger().info(f"goal {status} ({code} {text}) after route "
                                    f"{','.join(driven) or '-'}")
        return result


def main() -> int:
    from rosproc import spin_standalone

    return spin_standalone("stock_jetrover", StockJetRover, threads=6)


if __name__ == "__main__":
    raise SystemExit(main())
